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
    if (context.follow && id == 0)
        follower_ = std::make_unique<follower_slot>(
            stores, context.apps, context.view, transports_, loop, *context.role,
            follow_credentials{context.options.follow_token, context.options.follow_ca_pem,
                               context.options.cluster.empty() ? std::string() : context.options.follow_token_file.value_or(""),
                               context.options.data_dir, context.options.board},
            *context.follow,
            context.auth.on);
    if (!context.options.cluster.empty()) {
        deliveries_while_primary_.emplace(*context.role, deliveries_);
        erasures_while_primary_.emplace(*context.role, service.erasures());
        if (id == 0) make_coordinator(loop, poller);
    }
}

void shard_capabilities::make_coordinator(runtime::loop& loop, runtime::poller& poller) {
    PERCORE_REQUIRES(follower_ != nullptr && context_.follow != nullptr);
    const server_options& o = context_.options;
    auto endpoints = parse_cluster_endpoints(o.cluster);
    PERCORE_ASSERT(endpoints.has_value());  // the options checked them
    coordinator_ = std::make_unique<coordinator>(
        loop, poller,
        cluster_config{std::move(*endpoints), o.group, o.board, o.advertise, std::chrono::seconds(o.cluster_ttl_seconds),
                       context_.sync, std::chrono::milliseconds(std::int64_t{o.sync_timeout_seconds} * 1000)},
        *context_.role, *follower_, *context_.follow, context_.view, context_.handover_requested, context_.handed_over);
}

// A board that may change its role (--cluster) runs deliveries and erasures only while it is the
// primary; one that cannot runs them always (a primary) or never (a --follow follower).
void shard_capabilities::register_with(shard_tasks& tasks) {
    tasks.add(service_.waits());
    tasks.add(service_.backups());
    if (deliveries_while_primary_) {
        tasks.add_issuer(issuer::delivery, *deliveries_while_primary_);
    } else if (!context_.options.follow_url) {
        tasks.add_issuer(issuer::delivery, deliveries_);
    }
    if (follower_) tasks.add_issuer(issuer::follower, *follower_);
    if (coordinator_) tasks.add(*coordinator_);
    if (erasures_while_primary_) {
        tasks.add_issuer(issuer::app_erasure, *erasures_while_primary_);
    } else if (!context_.options.follow_url) {
        tasks.add_issuer(issuer::app_erasure, service_.erasures());
    }
}

}  // namespace percore::shards
