#include "shards/apps/apps_admin.hpp"

#include <algorithm>
#include <ctime>

#include "crypto/digest.hpp"
#include "shards/base/json_text.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/base/http_decisions.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/log_line.hpp"
#include "shards/base/limits.hpp"
#include "shards/base/result.hpp"
#include "shards/runtime/check.hpp"
#include "shards/base/write_ticket.hpp"
#include "store/document.hpp"

namespace percore::shards {

namespace {

bool is_read(net::method m) { return m == net::method::get || m == net::method::head; }

std::uint64_t sum_counter(const app_entry& app, std::atomic<std::uint64_t> app_counters::*field) {
    std::uint64_t n = 0;
    for (unsigned s = 0; s < app.shard_count(); ++s) n += (app.counters(s).*field).load(std::memory_order_relaxed);
    return n;
}

void append_unix_or_null(std::string& out, std::int64_t t) {
    if (t > 0) append_uint(out, static_cast<std::uint64_t>(t));
    else out.append("null");
}

}  // namespace

apps_admin::apps_admin(store_client& stores, app_registry& apps, access_control& access, const server_view& server,
                       app_erasures& erasures)
    : stores_(stores), apps_(apps), access_(access), server_(server), erasures_(erasures) {}

std::uint64_t apps_admin::tag_of(net::answer_ticket ticket) const { return write_ticket{stores_.self(), ticket}.encode(); }

net::request_handler::result apps_admin::handle(net::request& req, net::response& res, const net::route& r,
                                                const principal& who, net::answer_ticket ticket) {
    using net::method;
    using net::target_kind;
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    PERCORE_REQUIRES(r.kind == target_kind::apps || r.kind == target_kind::app || r.kind == target_kind::app_tokens ||
                     r.kind == target_kind::app_token || r.kind == target_kind::replication_tokens ||
                     r.kind == target_kind::replication_token);
    const method verb = req.head.verb;
    if (r.kind == target_kind::replication_tokens || r.kind == target_kind::replication_token)
        return replication_tokens(req, res, r, who, ticket);
    if (r.kind == target_kind::apps) {
        if (is_read(verb)) list_apps(res);
        else res.error(405, "method not allowed", "GET, HEAD");
        return net::request_handler::result::answered;
    }
    app_entry* app = apps_.find(r.app);
    const bool exists = app && app->exists();
    if (r.kind == target_kind::app) {
        if (verb == method::put) return put_app(req, res, r, ticket);
        if (verb == method::del) return delete_app(res, r, ticket);
        if (!is_read(verb)) res.error(405, "method not allowed", "GET, HEAD, PUT, DELETE");
        else if (!exists) res.error(404, "no such app");
        else app_info(res, *app);
        return net::request_handler::result::answered;
    }
    if (!exists) {
        res.error(404, "no such app");
        return net::request_handler::result::answered;
    }
    if (r.kind == target_kind::app_tokens) {
        if (verb == method::post) return make_token(req, res, r, who, ticket);
        if (is_read(verb)) list_tokens(res, r, who);
        else res.error(405, "method not allowed", "GET, HEAD, POST");
        return net::request_handler::result::answered;
    }
    if (verb == method::del) return revoke_token(res, r, who, ticket);
    res.error(405, "method not allowed", "DELETE");
    return net::request_handler::result::answered;
}

// /_replication/tokens: the app tokens' requests, for the tokens of no app (r.app is empty, as
// their records' "app" is).
net::request_handler::result apps_admin::replication_tokens(net::request& req, net::response& res,
                                                            const net::route& r, const principal& who,
                                                            net::answer_ticket ticket) {
    using net::method;
    PERCORE_REQUIRES(r.app.empty());
    const method verb = req.head.verb;
    if (r.kind == net::target_kind::replication_token) {
        if (verb == method::del) return revoke_token(res, r, who, ticket);
        res.error(405, "method not allowed", "DELETE");
    } else if (verb == method::post) {
        return make_token(req, res, r, who, ticket);
    } else if (is_read(verb)) {
        list_tokens(res, r, who);
    } else {
        res.error(405, "method not allowed", "GET, HEAD, POST");
    }
    return net::request_handler::result::answered;
}

void apps_admin::list_apps(net::response& res) {
    text_.assign("{\"apps\":[");
    bool first = true;
    for (const std::string& name : apps_.names()) {
        if (!first) text_.push_back(',');
        first = false;
        append_json_string(text_, name);
    }
    text_.append("]}");
    res.json(200, text_);
}

void apps_admin::app_info(net::response& res, app_entry& app) {
    text_.assign("{\"app\":");
    append_json_string(text_, app.name());
    text_.append(",\"quota\":");
    append_quota_json(text_, app.quota());
    text_.append(",\"usage\":{\"documents\":");
    append_uint(text_, static_cast<std::uint64_t>(std::max<std::int64_t>(0, app.documents())));
    text_.append(",\"bytes\":");
    append_uint(text_, static_cast<std::uint64_t>(std::max<std::int64_t>(0, app.bytes())));
    text_.append(",\"requests\":");
    append_uint(text_, sum_counter(app, &app_counters::requests));
    text_.append(",\"connections\":");
    append_uint(text_, app.connections());
    text_.append(",\"refused\":{\"quota\":");
    append_uint(text_, sum_counter(app, &app_counters::refused_quota));
    text_.append(",\"rate\":");
    append_uint(text_, sum_counter(app, &app_counters::refused_rate));
    text_.append(",\"auth\":");
    append_uint(text_, sum_counter(app, &app_counters::refused_auth));
    text_.append("},\"feeds\":{\"open\":");
    append_uint(text_, sum_counter(app, &app_counters::feeds_open));
    text_.append(",\"changes_sent\":");
    append_uint(text_, sum_counter(app, &app_counters::feed_changes_sent));
    text_.append(",\"cursors_expired\":");
    append_uint(text_, sum_counter(app, &app_counters::feed_cursors_expired));
    text_.append("}}}");
    res.json(200, text_);
}

void apps_admin::submit(std::string key, std::string value, store::precondition pre, pending_op op,
                        net::answer_ticket ticket) {
    op.tag = tag_of(ticket);
    op.by = acting_as(access_.principal_of(ticket));
    const bool erase = op.kind == op_kind::revoke_token;
    pending_.push_back(std::move(op));
    submit_catalog_write(stores_, pending_.back().tag, std::move(key), value, std::move(pre), erase);
}

net::request_handler::result apps_admin::put_app(net::request& req, net::response& res, const net::route& r,
                                                 net::answer_ticket ticket) {
    std::string_view body = req.body();
    json_value doc;
    if (!body.empty()) {
        auto parsed = parse_json(body);
        if (!parsed || parsed->what != json_value::kind::object) {
            res.error(400, parsed ? "body must be a JSON object" : "malformed JSON body");
            return net::request_handler::result::answered;
        }
        doc = std::move(*parsed);
    }
    for (const std::string& name : doc.names) {
        if (name != "quota") {
            res.error(400, "unknown field in the app body");
            return net::request_handler::result::answered;
        }
    }
    auto quota = quota_from_json(doc.find("quota"));
    if (!quota) {
        res.error(400, "malformed quota");
        return net::request_handler::result::answered;
    }
    app_entry* app = apps_.insert(r.app);
    if (!app) {
        res.error(507, "too many apps");
        return net::request_handler::result::answered;
    }
    if (app->state() == app_state::deleting) {
        res.error(409, "app is being deleted; retry shortly");
        return net::request_handler::result::answered;
    }
    pending_op op;
    op.kind = op_kind::put_app;
    op.app = app;
    op.quota = *quota;
    submit(catalog_key(app_records, r.app), encode_app_record(*quota), {}, std::move(op), ticket);
    return net::request_handler::result::pending;
}

net::request_handler::result apps_admin::delete_app(net::response& res, const net::route& r, net::answer_ticket ticket) {
    app_entry* app = apps_.find(r.app);
    if (!app || !app->exists()) {
        res.error(404, "no such app");
        return net::request_handler::result::answered;
    }
    pending_op op;
    op.kind = op_kind::delete_app;
    op.app = app;
    submit(catalog_key(deleted_records, r.app), "{}", {}, std::move(op), ticket);
    return net::request_handler::result::pending;
}

namespace {

// The token a POST /_apps/{app}/tokens body asks for — its scope, prefix and expiry — or the 400
// that refuses the body. A replication token's body (POST /_replication/tokens) has a ttl only.
result<token_record> requested_token(std::string_view body, std::int64_t now, bool replication) {
    auto parsed = parse_json(body.empty() && replication ? std::string_view("{}") : body);
    if (!parsed || parsed->what != json_value::kind::object)
        return std::unexpected(problem{400, parsed ? "body must be a JSON object" : "malformed JSON body"});
    for (const std::string& name : parsed->names)
        if (name != "ttl" && (replication || (name != "scope" && name != "prefix")))
            return std::unexpected(problem{400, "unknown field in the token body"});
    const json_value* scope = parsed->find("scope");
    const json_value* prefix = parsed->find("prefix");
    const json_value* ttl = parsed->find("ttl");
    auto s = replication ? std::optional(token_scope::replicate)
             : scope && scope->what == json_value::kind::string ? parse_scope(scope->text) : std::nullopt;
    if (!s) return std::unexpected(problem{400, "scope must be read, write or admin"});
    if (prefix && prefix->what != json_value::kind::string && prefix->what != json_value::kind::null)
        return std::unexpected(problem{400, "prefix must be a string"});
    token_record t;
    t.scope = *s;
    if (prefix && prefix->what == json_value::kind::string) t.prefix = prefix->text;
    if (t.prefix.size() > net::max_key_bytes) return std::unexpected(problem{400, "prefix longer than a key"});
    if (ttl && ttl->what != json_value::kind::null) {
        auto n = ttl->as_count();
        if (!n || *n == 0 || *n > max_token_ttl_seconds)
            return std::unexpected(problem{400, "ttl must be a whole number of seconds from 1 to ten years"});
        t.expires = now + static_cast<std::int64_t>(*n);
    }
    return t;
}

}  // namespace

net::request_handler::result apps_admin::make_token(net::request& req, net::response& res, const net::route& r,
                                                    const principal& who, net::answer_ticket ticket) {
    const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
    auto t = requested_token(req.body(), now, r.kind == net::target_kind::replication_tokens);
    if (!t) {
        res.error(t.error().status, t.error().reason);
        return net::request_handler::result::answered;
    }
    // an app's admin token makes tokens within its own reach
    if (who.kind == principal_kind::app_token && !t->prefix.starts_with(who.prefix)) {
        res.error(403, "prefix outside the token's own prefix");
        return net::request_handler::result::answered;
    }
    // a replication token belongs to no app (r.app is empty), and only the server admin makes one
    app_entry* app = r.app.empty() ? nullptr : apps_.find(r.app);
    PERCORE_ASSERT(app != nullptr || r.kind == net::target_kind::replication_tokens);  // handle() answered 404
    if (app && !app->reserve(app_object::token, max_app_tokens)) {
        res.error(507, "limit: tokens");
        return net::request_handler::result::answered;
    }
    new_token made = shards::make_token();
    // with --auth off the crypto module is loaded by the first token made (for a later --auth on)
    std::span<const char> token_bytes(made.token.data(), made.token.size());
    auto digest = access_.api() ? crypto::sha256(*access_.api(), token_bytes) : crypto::sha256(token_bytes);
    if (!digest) {
        if (app) app->release(app_object::token);
        res.error(503, "cannot hash the token: crypto module unavailable");
        return net::request_handler::result::answered;
    }
    t->app.assign(r.app);
    t->created = now;
    t->hash = *digest;
    pending_op op;
    op.kind = op_kind::make_token;
    op.app = app;
    op.id = made.id;
    op.token = std::move(made.token);
    store::precondition absent;
    absent.has_if_none_match = true;
    absent.if_none_match_any = true;  // a 64-bit id collision is refused, never overwritten
    submit(catalog_key(token_records, made.id), encode_token_record(*t), std::move(absent), std::move(op), ticket);
    return net::request_handler::result::pending;
}

// Every shard's token records are scanned (they are keyed by id, not by app), but only the app's
// own are decoded (token_record_of: a prefix compare): a GET costs ~a compare per token of the
// server and a decode per token of the app, at most max_app_tokens (review M1).
void apps_admin::list_tokens(net::response& res, const net::route& r, const principal& who) {
    struct row {
        std::string id;
        token_record t;
    };
    std::vector<row> rows;
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* snap = stores_.current(i);
        if (!snap) continue;
        store::snapshot::cursor c;
        for (c.seek(*snap, token_records, false); c.valid() && c.doc().key().starts_with(token_records); c.next()) {
            if (c.doc().in_file() || !token_record_of(c.doc().value(), r.app)) continue;
            auto t = decode_token_record(c.doc().value());
            if (!t || t->app != r.app || !manages(who, t->prefix)) continue;
            rows.push_back({std::string(c.doc().key().substr(token_records.size())), std::move(*t)});
        }
    }
    std::sort(rows.begin(), rows.end(), [](const row& a, const row& b) { return a.id < b.id; });
    text_.assign("{\"tokens\":[");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i) text_.push_back(',');
        text_.append("{\"id\":");
        append_json_string(text_, rows[i].id);
        text_.append(",\"scope\":\"").append(scope_name(rows[i].t.scope)).append("\",\"prefix\":");
        if (rows[i].t.prefix.empty()) text_.append("null");
        else append_json_string(text_, rows[i].t.prefix);
        text_.append(",\"expires\":");
        append_unix_or_null(text_, rows[i].t.expires);
        text_.append(",\"last_used\":");
        append_unix_or_null(text_, apps_.token_last_used(rows[i].id));
        text_.push_back('}');
    }
    text_.append("]}");
    res.json(200, text_);
}

net::request_handler::result apps_admin::revoke_token(net::response& res, const net::route& r, const principal& who,
                                                      net::answer_ticket ticket) {
    const store::document* doc = access_.token_document(r.key);
    std::optional<token_record> t;
    if (doc && !doc->in_file())
        if (auto d = decode_token_record(doc->value())) t = std::move(*d);
    if (!t || t->app != r.app) {
        res.error(404, "no such token");
        return net::request_handler::result::answered;
    }
    if (!manages(who, t->prefix)) {
        res.error(403, "token outside the token's own prefix");
        return net::request_handler::result::answered;
    }
    pending_op op;
    op.kind = op_kind::revoke_token;
    op.app = apps_.find(r.app);
    op.id.assign(r.key);
    store::precondition same;
    same.has_if_match = true;
    same.if_match.push_back(doc->etag_version());
    submit(catalog_key(token_records, r.key), {}, std::move(same), std::move(op), ticket);
    return net::request_handler::result::pending;
}

std::optional<net::simple_answer> apps_admin::write_done(const store::write_result& result) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    for (std::size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].tag != result.tag) continue;
        pending_op op = std::move(pending_[i]);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        return finish(op, result);
    }
    PERCORE_ASSERT(!"a catalog write's result with no pending request");
    return net::simple_answer{500, false, 0, "internal error"};
}

net::simple_answer apps_admin::finish(pending_op& op, const store::write_result& result) {
    using store::write_outcome;
    const bool ok = result.outcome == write_outcome::created || result.outcome == write_outcome::replaced ||
                    result.outcome == write_outcome::deleted;
    if (!ok && op.kind == op_kind::make_token && op.app) op.app->release(app_object::token);
    if (!ok && op.kind == op_kind::revoke_token &&
        (result.outcome == write_outcome::not_found || result.outcome == write_outcome::precondition_failed))
        return {404, false, 0, "no such token"};
    if (!ok && op.kind == op_kind::make_token && result.outcome == write_outcome::precondition_failed)
        return {503, false, 0, "token id collision; try again"};
    if (!ok) return write_answer(result.outcome, result.version, result.current_exists);
    log_change(op, result);
    switch (op.kind) {
    case op_kind::put_app:
        op.app->set_quota(op.quota);
        if (op.app->state() != app_state::deleting) op.app->set_state(app_state::created);
        return {result.outcome == write_outcome::created ? 201 : 204, false, 0, nullptr};
    case op_kind::delete_app:
        op.app->set_state(app_state::deleting);
        // before the answer: every connection and feed that verified a token of the app checks it
        // again (access.hpp), so none survives the app's deletion and creation again
        apps_.token_revoked();
        erasures_.begin(op.app);
        return {204, false, 0, nullptr};
    case op_kind::make_token:
        text_.assign("{\"id\":");
        append_json_string(text_, op.id);
        text_.append(",\"token\":");
        append_json_string(text_, op.token);
        text_.push_back('}');
        op.token.assign(op.token.size(), '\0');  // the secret is kept nowhere once shown
        return {201, false, 0, nullptr, text_};
    case op_kind::revoke_token:
        if (op.app) op.app->release(app_object::token);
        apps_.forget_token(op.id);
        apps_.token_revoked();  // before the answer: every cached token is looked up again
        return {204, false, 0, nullptr};
    }
    return {500, false, 0, "internal error"};
}

void apps_admin::log_change(const pending_op& op, const store::write_result& result) const {
    std::string line = "admin: ";
    switch (op.kind) {
    case op_kind::put_app:
        line.append("app ").append(op.app->name());
        line.append(result.outcome == store::write_outcome::created ? " created" : " quota set");
        break;
    case op_kind::delete_app: line.append("app ").append(op.app->name()).append(" deleted"); break;
    case op_kind::make_token:
    case op_kind::revoke_token:
        // an id is 16 hex digits and an app name [a-z0-9_-]: nothing in the line comes from a client's bytes
        if (op.app) line.append("token ").append(op.id).append(" of app ").append(op.app->name());
        else line.append("replication token ").append(op.id);
        line.append(op.kind == op_kind::make_token ? " made" : " revoked");
        break;
    }
    line.append(" by ").append(op.by);
    log_line(line);
}

// ---- start

void apps_admin::recovered(const store::snapshot& snap, bool auth_on) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    std::uint64_t skipped = 0;
    store::snapshot::cursor c;
    for (c.seek(snap, std::string_view(), false); c.valid(); c.next()) {
        const store::document& doc = c.doc();
        std::string_view key = doc.key();
        std::size_t nul = key.find('\0');
        if (nul == std::string_view::npos || nul == 0) continue;
        std::string_view ns = key.substr(0, nul), rest = key.substr(nul + 1);
        if (ns != catalog_namespace) {
            if (ns.size() > net::max_app_bytes) continue;
            app_entry* app = apps_.insert(ns);
            if (!app) continue;
            app->add_recovered(1, static_cast<std::int64_t>(doc.value_size()));
            if (!auth_on) app->promote(app_state::absent, app_state::implicit);
            continue;
        }
        if (rest.starts_with("app/") && !doc.in_file()) {
            app_entry* app = catalog_app(rest.substr(4), skipped);
            auto quota = decode_app_record(doc.value());
            if (!app || !quota) continue;
            app->set_quota(*quota);
            if (!app->promote(app_state::absent, app_state::created)) app->promote(app_state::implicit, app_state::created);
        } else if (rest.starts_with("token/") && !doc.in_file()) {
            count_recovered_token(doc.value());
        } else if (rest.starts_with("delivery/")) {
            count_recovered_delivery(rest.substr(9));
        } else if (rest.starts_with("deleted/")) {
            app_entry* app = catalog_app(rest.substr(8), skipped);
            if (!app) continue;
            app->set_state(app_state::deleting);
            erasures_.begin(app);
        }
    }
    if (skipped) {
        std::string line = "shard ";
        append_uint(line, stores_.self());
        line.append(": skipped ");
        append_uint(line, skipped);
        line.append(" catalog records naming no valid app (written by an older follower from a bad page)");
        log_line(line);
    }
}

// The registry's entry of an app named by a catalog record at start, or null (counted in `skipped`)
// when the name breaks the app name rule: a directory an older follower filled from a bad page
// (review M2) must start, not abort in the registry's REQUIRES.
app_entry* apps_admin::catalog_app(std::string_view name, std::uint64_t& skipped) {
    if (net::valid_app_name(name)) return apps_.insert(name);
    ++skipped;
    return nullptr;
}

// SPEC §7's caps count what the catalog holds at start (an erasure in progress ends with zero).
void apps_admin::count_recovered_token(std::string_view value) {
    auto t = decode_token_record(value);
    if (!t || !net::valid_app_name(t->app)) return;
    if (app_entry* app = apps_.insert(t->app)) app->add_recovered(app_object::token);
}

void apps_admin::count_recovered_delivery(std::string_view app_and_name) {
    const std::size_t slash = app_and_name.find('/');
    if (slash == std::string_view::npos || !net::valid_app_name(app_and_name.substr(0, slash))) return;
    if (app_entry* app = apps_.insert(app_and_name.substr(0, slash))) app->add_recovered(app_object::delivery);
}

bool apps_admin::holds(std::uint64_t tag) const {
    return std::any_of(pending_.begin(), pending_.end(), [tag](const pending_op& op) { return op.tag == tag; });
}

}  // namespace percore::shards
