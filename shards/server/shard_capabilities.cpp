#include "shards/server/shard_capabilities.hpp"

namespace percore::shards {

shard_capabilities::shard_capabilities(shard_context& context, unsigned id, store_client& stores,
                                       document_service& service, shard_metrics& metrics, runtime::loop& loop,
                                       runtime::poller& poller)
    : context_(context),
      service_(service),
      transports_(loop, poller),
      deliveries_(stores, context.apps, context.view.data_identity(), transports_, context.deliveries_timing, metrics,
                  loop, context.options.deliveries_allow) {
    deliveries_.attach_signal(context.feeds);
    PERCORE_REQUIRES(context.role != nullptr);
    service.set_role(*context.role);
    if (context.follow && context.options.follow_url) {
        if (id == 0)
            follower_ = std::make_unique<follower>(stores, context.apps, context.view, transports_, loop,
                                                   follow_config{*context.options.follow_url, context.options.follow_token,
                                                                 context.options.follow_ca_pem},
                                                   *context.follow, context.auth.on);
    }
}

void shard_capabilities::register_with(shard_tasks& tasks) {
    tasks.add(service_.waits());
    tasks.add(service_.backups());
    const bool follows = context_.follow != nullptr;
    if (!follows) tasks.add_issuer(issuer::delivery, deliveries_);
    if (follower_) tasks.add_issuer(issuer::follower, *follower_);
    if (!follows) tasks.add_issuer(issuer::app_erasure, service_.erasures());
}

}  // namespace percore::shards
