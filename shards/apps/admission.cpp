#include "shards/apps/admission.hpp"

#include <charconv>
#include <chrono>

#include "shards/base/json_text.hpp"
#include "shards/base/log_line.hpp"
#include "shards/base/metrics.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/runtime/check.hpp"
#include "store/document.hpp"

namespace percore::shards {

namespace {

bool is_write(net::method verb) {
    return verb != net::method::get && verb != net::method::head && verb != net::method::options;
}

// Documents, lists and feeds count against their app's connections and requests (SPEC §7, §8), and
// so does the administration an app's own token does (its app, tokens and deliveries: SPEC §7, so
// that an app admin's flood waits behind its own app's rate and turns, not in front of others').
bool counts_against_app(net::target_kind kind, const principal& who) {
    using net::target_kind;
    if (kind == target_kind::document || kind == target_kind::list || kind == target_kind::changes) return true;
    const bool app_admin_route = kind == target_kind::app || kind == target_kind::app_tokens ||
                                 kind == target_kind::app_token || kind == target_kind::app_deliveries ||
                                 kind == target_kind::app_delivery;
    return app_admin_route && who.kind == principal_kind::app_token;
}

std::int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

admission_control::admission_control(store_client& stores, app_registry& apps, access_control& access)
    : stores_(stores), apps_(apps), access_(access), self_(stores.self()) {
    key_.reserve(net::max_app_bytes + 1 + net::max_key_bytes);
}

net::admission admission_control::admit(const net::request_head& head, const net::route& r, net::response& res,
                                        net::answer_ticket ticket) {
    PERCORE_REQUIRES(on_shard_thread(self_));
    if (!access_.from_allowed_host(head)) {  // auth off: a browser's page reached us by DNS rebinding
        res.error(403, "host not allowed");
        return {false, 0};
    }
    if (r.kind == net::target_kind::health || r.kind == net::target_kind::bad) return {};
    if (role_ && is_write(head.verb) && r.kind != net::target_kind::asterisk &&
        r.kind != net::target_kind::not_found && refuse_write_here(res))
        return {false, 0};
    app_entry* app = app_named(r.app, ticket);
    refusal why;
    const principal* who = access_.authenticate(head, ticket, why);
    if (who) why = access_.authorize(*who, r, head.verb, app);
    if (!who || why.status) {
        refuse(res, why, app);
        return {false, 0};
    }
    if (!counts_against_app(r.kind, *who)) return {};
    const bool put = head.verb == net::method::put && r.kind == net::target_kind::document;
    if (!app && put && !access_.auth_on()) {
        app = implicit_app(r.app, res);
        if (!app) return {false, 0};
    }
    if (!app) return {};
    if (who->kind != principal_kind::server_admin && !within_request_quotas(*app, ticket, res))
        return {false, app->index()};
    if (put && refuse_for_quota(head, r, *app, res)) return {false, app->index()};
    add(app->counters(self_).requests);
    return {true, app->index()};
}

// --auth off: an app is made by its first write.
app_entry* admission_control::implicit_app(std::string_view name, net::response& res) {
    app_entry* app = apps_.insert(name);
    if (!app) {
        res.error(507, "too many apps");
        return nullptr;
    }
    app->promote(app_state::absent, app_state::implicit);
    return app;
}

// The app's connections (this connection counts against it from now on), then its requests per
// second; false when one of them refused the request with a 429.
bool admission_control::within_request_quotas(app_entry& app, net::answer_ticket ticket, net::response& res) {
    if (!bound_to(app, ticket) && !bind_connection(app, ticket)) {
        add(app.counters(self_).refused_quota);
        res.error_with_header(429, "quota exceeded: connections", "Retry-After", "1");
        return false;
    }
    const std::uint32_t wait = app.limits_rate() ? app.take_request(steady_now_ns()) : 0;
    if (!wait) return true;
    add(app.counters(self_).refused_rate);
    char seconds[12];
    auto [end, ec] = std::to_chars(seconds, seconds + sizeof seconds, wait);
    res.error_with_header(429, "quota exceeded: requests_per_second", "Retry-After",
                          std::string_view(seconds, static_cast<std::size_t>(end - seconds)));
    return false;
}

// A document write's quotas, before its body is read: max_document_bytes by the announced length,
// documents and bytes by what the write would change in the owner's current snapshot (the store
// checks them again, exactly, when it applies the write). True when it answered a refusal.
bool admission_control::refuse_for_quota(const net::request_head& head, const net::route& r, app_entry& app,
                                         net::response& res) {
    const app_quota q = app.quota();
    const std::uint64_t size = head.has_content_length ? head.content_length : 0;
    if (head.has_content_length && q.max_document_bytes != unlimited && size > q.max_document_bytes) {
        add(app.counters(self_).refused_quota);
        res.error(413, "quota exceeded: max_document_bytes");
        return true;
    }
    if (q.documents == unlimited && q.bytes == unlimited) return false;
    key_.assign(r.app);
    key_.push_back('\0');
    key_.append(r.key);
    const store::snapshot* snap = stores_.current(stores_.owner_of(key_));
    const store::document* doc = snap ? snap->find(key_) : nullptr;
    const std::int64_t documents = doc ? 0 : 1;
    const std::int64_t bytes = static_cast<std::int64_t>(size) - (doc ? static_cast<std::int64_t>(doc->value_size()) : 0);
    const quota_verdict v = app.would_pass(documents, bytes);
    if (v == quota_verdict::ok) return false;
    add(app.counters(self_).refused_quota);
    res.error(507, v == quota_verdict::documents ? "quota exceeded: documents" : "quota exceeded: bytes");
    return true;
}

// The connection counts against `app` from now on (once per connection and app); false when the
// app's `connections` quota is full.
bool admission_control::bind_connection(app_entry& app, net::answer_ticket ticket) {
    if (ticket.index >= bindings_.size()) bindings_.resize(ticket.index + 1);
    binding& b = bindings_[ticket.index];
    if (b.generation != ticket.generation) {
        if (b.app) b.app->drop_connection();  // a slot reused without closed(): never double-count
        b = binding{ticket.generation, nullptr};
    }
    if (b.app == &app) return true;
    if (!app.take_connection()) return false;
    if (b.app) b.app->drop_connection();
    b.app = &app;
    return true;
}

void admission_control::refuse(net::response& res, const refusal& why, app_entry* app) {
    if (app && (why.status == 401 || why.status == 403)) add(app->counters(self_).refused_auth);
    if (why.status == 401) {
        note_auth_failure(why);
        res.error_with_header(401, why.reason, "WWW-Authenticate", "Bearer");
    } else {
        res.error(why.status, why.reason);
    }
}

// One line for the first failure of each second, counting those it stood in for (like Redis's ACL
// LOG: what failed, never the token that was presented).
void admission_control::note_auth_failure(const refusal& why) {
    ++auth_failures_unlogged_;
    const std::int64_t now = steady_now_ns();
    if (auth_logged_at_ns_ != 0 && now - auth_logged_at_ns_ < auth_log_interval_ns) return;
    std::string line = "auth: ";
    append_uint(line, auth_failures_unlogged_);
    line.append(auth_failures_unlogged_ == 1 ? " request" : " requests");
    line.append(" refused 401 on shard ");
    append_uint(line, self_);
    line.append(" since the last such line (latest: ").append(why.reason).append(")");
    log_line(line);
    auth_failures_unlogged_ = 0;
    auth_logged_at_ns_ = now;
}

app_entry* admission_control::app_named(std::string_view name, net::answer_ticket ticket) const {
    PERCORE_REQUIRES(on_shard_thread(self_));
    if (name.empty()) return nullptr;
    if (ticket.index < bindings_.size()) {
        const binding& b = bindings_[ticket.index];
        if (b.generation == ticket.generation && b.app && b.app->name() == name) return b.app;
    }
    return apps_.find(name);
}

void admission_control::set_role(const board_role& role) {
    PERCORE_REQUIRES(runtime::this_shard() == runtime::no_shard);
    role_ = &role;
}

// A follower takes no write, whoever asks: the client is at the wrong board (421, RFC 9110
// §15.5.20, naming the primary). A board that is neither (fenced: its lease lost or not yet
// decided, SPEC §12) answers 503: the group will have a primary again within its lease's TTL.
bool admission_control::refuse_write_here(net::response& res) {
    PERCORE_REQUIRES(role_ != nullptr);
    const board_kind kind = role_->kind();
    if (kind == board_kind::primary && role_->may_acknowledge_now()) return false;
    if (kind == board_kind::follower) {
        refusal_.assign("{\"error\":\"read-only follower\",\"primary\":");
        append_json_string(refusal_, role_->leader_url());
        refusal_.push_back('}');
        res.json(421, refusal_);
        return true;
    }
    res.error_with_header(503, "not a primary now", "Retry-After", "1");
    return true;
}

void admission_control::closed(net::answer_ticket ticket) {
    PERCORE_REQUIRES(on_shard_thread(self_));
    if (ticket.index >= bindings_.size()) return;
    binding& b = bindings_[ticket.index];
    if (b.generation != ticket.generation || !b.app) return;
    b.app->drop_connection();
    b.app = nullptr;
}

}  // namespace percore::shards
