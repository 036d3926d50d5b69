#include "shards/http/document_service.hpp"

#include <new>
#include <type_traits>

#include "shards/base/metrics.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

// OPTIONS *: every method some target allows (a document's are all of them).
constexpr std::string_view server_methods = document_methods;

}  // namespace

document_service::document_service(store_client& stores, const server_view& server, shard_metrics& metrics,
                                   app_registry& apps, const auth_config& auth, const net::cidr_list& deliveries_allow)
    : metrics_(metrics),
      access_(stores, apps, auth),
      admission_(stores, apps, access_),
      erasures_(stores, server),
      feed_(stores, server.data_identity()),
      waits_(feed_, stores, metrics, apps, access_),
      backups_(stores.self(), stores.shard_count()),
      documents_(stores, admission_),
      changes_(feed_, waits_, apps, metrics, stores.self()),
      apps_admin_(stores, apps, access_, server, erasures_),
      deliveries_(stores, apps, feed_, deliveries_allow),
      backup_(backups_, stores.self()),
      admin_(server, stores.self(), &feed_) {
    fill_endpoints();
}

void document_service::fill_endpoints() {
    using net::target_kind;
    for (target_kind k : {target_kind::document, target_kind::list}) endpoints_.set(k, documents_);
    for (target_kind k : {target_kind::changes, target_kind::replication}) endpoints_.set(k, changes_);
    for (target_kind k : {target_kind::apps, target_kind::app, target_kind::app_tokens, target_kind::app_token,
                          target_kind::replication_tokens, target_kind::replication_token})
        endpoints_.set(k, apps_admin_);
    for (target_kind k : {target_kind::app_deliveries, target_kind::app_delivery}) endpoints_.set(k, deliveries_);
    endpoints_.set(target_kind::backup, backup_);
    for (target_kind k : {target_kind::health, target_kind::metrics, target_kind::stats}) endpoints_.set(k, admin_);
    for (target_kind k : {target_kind::not_found, target_kind::bad, target_kind::asterisk})
        endpoints_.set(k, route_answers_);
    PERCORE_ASSERT(endpoints_.complete());  // a new target_kind needs its endpoint here
}

void document_service::attach(net::answer_sink* sink, feed_signal* signal, backup_captures* captures,
                              backup_source source) {
    PERCORE_REQUIRES(sink != nullptr && runtime::this_shard() == runtime::no_shard);
    waits_.attach(sink, signal);
    backups_.attach(sink, captures, std::move(source));
}

void document_service::answered(net::method verb, int status, std::uint64_t latency_ns) {
    metrics_.record_request(verb, status, latency_ns);
}

void document_service::closed(net::answer_ticket ticket) {
    waits_.closed(ticket);
    backups_.closed(ticket);
    access_.closed(ticket);
    admission_.closed(ticket);
}

// The route of a request: parsed once by admit(), and reused by handle() when nothing was parsed
// into the scratch in between (a request without a body: handle() follows at once).
const net::route& document_service::route_of(const net::request_head& head, net::answer_ticket ticket, bool admitting) {
    if (!admitting && parsed_.valid && parsed_.ticket.index == ticket.index &&
        parsed_.ticket.generation == ticket.generation && parsed_.target == head.target.data() &&
        parsed_.size == head.target.size()) {
        parsed_.valid = false;
        return parsed_.r;
    }
    // Made in place (a prvalue initializes it: no copy of the ~130-byte route, ~34 instructions of
    // every request, callgrind); route is trivially destructible, so nothing is left to destroy.
    static_assert(std::is_trivially_destructible_v<net::route>);
    ::new (static_cast<void*>(&parsed_.r)) net::route(net::parse_route(head.target, scratch_));
    parsed_.valid = admitting;
    parsed_.ticket = ticket;
    parsed_.target = head.target.data();
    parsed_.size = head.target.size();
    return parsed_.r;
}

net::admission document_service::admit(const net::request_head& head, net::response& res, net::answer_ticket ticket) {
    return admission_.admit(head, route_of(head, ticket, true), res, ticket);
}

net::request_handler::result document_service::handle(net::request& req, net::response& res, net::answer_ticket ticket) {
    const net::route& r = route_of(req.head, ticket, false);
    return endpoints_.dispatch(req, res, r, access_.principal_of(ticket), ticket);
}

net::request_handler::result document_service::route_answers::handle(net::request& req, net::response& res,
                                                                     const net::route& r, const principal&,
                                                                     net::answer_ticket) {
    PERCORE_REQUIRES(r.kind == net::target_kind::not_found || r.kind == net::target_kind::bad ||
                     r.kind == net::target_kind::asterisk);
    if (r.kind == net::target_kind::not_found) res.error(404, "not found");
    else if (r.kind == net::target_kind::bad) res.error(400, r.reason);
    // The connection lets `*` through only for OPTIONS (RFC 9112 §3.2.4).
    else if (req.head.verb == net::method::options) allow_answer(res, server_methods);
    else res.error(400, "malformed target");
    return result::answered;
}

}  // namespace percore::shards
