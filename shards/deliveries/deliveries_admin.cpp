#include "shards/deliveries/deliveries_admin.hpp"

#include "shards/runtime/check.hpp"

#include <algorithm>
#include <chrono>

#include "crypto/tls_client.hpp"
#include "shards/base/json_text.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/base/encoding.hpp"
#include "shards/base/http_decisions.hpp"
#include "shards/base/json_value.hpp"
#include "shards/base/limits.hpp"
#include "shards/base/log_line.hpp"
#include "shards/base/shard_task.hpp"
#include "shards/base/write_ticket.hpp"
#include "store/document.hpp"

namespace percore::shards {

namespace {

using handler_result = net::request_handler::result;

// A record stays in memory, where the admin and the engine read it (a value in a segment file would
// need a read): its url and prefix JSON-escaped at most 6x, its CA (the stored PEM escaped at most
// 33/28: limits.hpp; or, in a record written before ca_pem, a ca_file path escaped at most 6x) and
// ~1 KiB of the rest.
static_assert(max_delivery_url_bytes * 6 + net::max_key_bytes * 6 +
                      std::max(max_delivery_ca_stored_bytes * 33 / 28, max_delivery_ca_file_bytes * 6) + 1024 <
                  store::file_value_min_bytes,
              "a delivery record is read from memory");

constexpr std::string_view ca_file_refused =
    "ca_file is no longer taken (the server reads no file a tenant names): give the CA certificates as PEM text in "
    "ca_pem (SPEC 9)";

bool is_read(net::method m) { return m == net::method::get || m == net::method::head; }

constexpr const char* outside_reach = "delivery outside the token's own prefix";

// Whether `who` manages the delivery record `doc` (SPEC §7): a record that does not decode is
// shown only to a principal that manages every prefix.
bool listed_for(const principal& who, const store::document& doc) {
    if (manages(who, "")) return true;
    auto d = decode_delivery_record(doc.value());
    return d && manages(who, d->prefix);
}

// An optional string member: absent or null leaves `out`; another kind is an error.
bool optional_string(const json_value& body, std::string_view name, std::string& out) {
    const json_value* f = body.find(name);
    if (!f || f->what == json_value::kind::null) return true;
    if (f->what != json_value::kind::string) return false;
    out = f->text;
    return true;
}


}  // namespace

std::int64_t unix_now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

result<delivery_request> parse_delivery_request(std::string_view body) {
    auto v = parse_json(body, max_delivery_body_bytes);
    if (!v) return std::unexpected("malformed JSON body");
    if (v->what != json_value::kind::object) return std::unexpected("body must be a JSON object");
    if (v->find("ca_file")) return std::unexpected(std::string(ca_file_refused));
    for (const std::string& name : v->names)
        if (name != "url" && name != "prefix" && name != "seal" && name != "ca_pem" && name != "since")
            return std::unexpected("unknown field '" + name + "' in the delivery body");
    delivery_request d;
    const json_value* url = v->find("url");
    if (!url || url->what != json_value::kind::string) return std::unexpected("url is required (a string)");
    auto parsed = parse_delivery_url(url->text);
    if (!parsed) return std::unexpected(parsed.error());
    d.url = url->text;
    d.parsed = std::move(*parsed);
    if (!optional_string(*v, "prefix", d.prefix)) return std::unexpected("prefix must be a string");
    if (d.prefix.size() > net::max_key_bytes) return std::unexpected("prefix longer than a key");
    if (const json_value* seal = v->find("seal"); seal && seal->what != json_value::kind::null) {
        if (seal->what != json_value::kind::boolean) return std::unexpected("seal must be true or false");
        d.seal = seal->flag;
    }
    if (!optional_string(*v, "ca_pem", d.ca_pem)) return std::unexpected("ca_pem must be a string (PEM text)");
    if (d.ca_pem.size() > max_delivery_ca_pem_bytes) return std::unexpected("ca_pem is longer than 64 KiB");
    if (!d.ca_pem.empty() && !d.parsed.https) return std::unexpected("ca_pem is only for https urls");
    if (!optional_string(*v, "since", d.since) || d.since.empty())
        return std::unexpected("since must be \"now\", \"0\" or a cursor");
    return d;
}

deliveries_admin::deliveries_admin(store_client& stores, app_registry& apps, change_feed& feed,
                                   const net::cidr_list& allow)
    : stores_(stores), apps_(apps), feed_(feed), allow_(allow) {}

handler_result deliveries_admin::handle(net::request& req, net::response& res, const net::route& r,
                                        const principal& who, net::answer_ticket ticket) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    PERCORE_REQUIRES(r.kind == net::target_kind::app_deliveries || r.kind == net::target_kind::app_delivery);
    const net::method verb = req.head.verb;
    const app_entry* app = apps_.find(r.app);
    if (!app || !app->exists()) {
        res.error(404, "no such app");
        return handler_result::answered;
    }
    if (r.kind == net::target_kind::app_deliveries) {
        if (is_read(verb)) list(res, r, who);
        else res.error(405, "method not allowed", "GET, HEAD");
        return handler_result::answered;
    }
    if (verb == net::method::put) return put(req, res, r, who, ticket);
    if (verb == net::method::del) return erase(res, r, who, ticket);
    if (is_read(verb)) show(res, r, who);
    else res.error(405, "method not allowed", "GET, HEAD, PUT, DELETE");
    return handler_result::answered;
}

const store::document* deliveries_admin::find(std::string_view app, std::string_view name) {
    key_ = delivery_key(app, name);
    const store::snapshot* snap = stores_.current(stores_.owner_of(key_));
    const store::document* doc = snap ? snap->find(key_) : nullptr;
    return doc && !doc->in_file() ? doc : nullptr;
}

void deliveries_admin::list(net::response& res, const net::route& r, const principal& who) {
    const std::string prefix = delivery_records_of(r.app);
    std::vector<std::string> names;
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* snap = stores_.current(i);
        if (!snap) continue;
        store::snapshot::cursor c;
        for (c.seek(*snap, prefix, false); c.valid() && c.doc().key().starts_with(prefix); c.next()) {
            if (!listed_for(who, c.doc())) continue;
            names.emplace_back(c.doc().key().substr(prefix.size()));
        }
    }
    std::sort(names.begin(), names.end());
    text_.assign("{\"deliveries\":[");
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i) text_.push_back(',');
        append_json_string(text_, names[i]);
    }
    text_.append("]}");
    res.json(200, text_);
}

std::uint64_t delivery_lag_changes(change_feed& feed, const delivery_record& d, std::string_view app,
                                   std::string& scratch) {
    auto start = feed.start(d.cursor);
    if (!start) start = feed.start("0");  // an expired cursor: what is retained waits
    if (!start) return 0;
    std::string prefix(app);
    prefix.push_back('\0');
    prefix.append(d.prefix);
    std::uint64_t n = 0;
    while (n < max_delivery_lag_changes) {
        const auto limit = static_cast<std::uint32_t>(std::min<std::uint64_t>(net::max_list_limit, max_delivery_lag_changes - n));
        scratch.clear();
        const std::uint32_t listed = feed.page(*start, prefix, app.size() + 1, limit, change_feed::format::json_array, scratch);
        n += listed;
        if (listed < limit) break;  // fewer than asked: every shard's list was exhausted
    }
    return n;
}

std::int64_t delivery_lag_seconds(const delivery_record& d, std::uint64_t lag_changes, std::int64_t now_unix_ms) {
    return lag_changes ? std::max<std::int64_t>(0, now_unix_ms - d.cursor_moved_unix_ms) / 1000 : 0;
}

void deliveries_admin::show(net::response& res, const net::route& r, const principal& who) {
    const store::document* doc = find(r.app, r.key);
    if (!doc) {
        res.error(404, "no such delivery");
        return;
    }
    auto d = decode_delivery_record(doc->value());
    if (!d) {
        res.error(500, "malformed delivery record");
        return;
    }
    if (!manages(who, d->prefix)) {
        res.error(403, outside_reach);
        return;
    }
    const std::uint64_t lag = delivery_lag_changes(feed_, *d, r.app, page_);
    const std::int64_t waited_s = delivery_lag_seconds(*d, lag, unix_now_ms());
    text_.assign("{\"url\":");
    append_json_string(text_, d->url);
    text_.append(",\"state\":\"").append(state_name(d->state)).append("\",\"cursor\":");
    append_json_string(text_, d->cursor);
    text_.append(",\"lag\":{\"changes\":");
    append_uint(text_, lag);
    text_.append(",\"seconds\":");
    append_uint(text_, static_cast<std::uint64_t>(waited_s));
    text_.append("},\"attempts\":");
    append_uint(text_, d->attempts);
    text_.append(",\"last_status\":");
    if (d->last_status) append_uint(text_, static_cast<std::uint64_t>(*d->last_status));
    else text_.append("null");
    text_.append(",\"last_error\":");
    if (d->last_error) append_json_string(text_, *d->last_error);
    else text_.append("null");
    text_.push_back('}');
    res.json(200, text_);
}

// `since` as the change feed reads it; true when it answered the refusal (400, or 410 with the
// oldest cursor, as GET /_changes does).
bool deliveries_admin::refuse_since(net::response& res, std::string_view since, feed_cursor* out) {
    auto start = feed_.start(since);
    if (start) {
        if (out) *out = std::move(*start);
        return false;
    }
    if (start.error().status != 410) {
        res.error(start.error().status, start.error().reason);
        return true;
    }
    text_.assign("{\"error\":\"cursor expired\",\"oldest\":");
    append_json_string(text_, cursor_text(feed_.oldest()));
    text_.push_back('}');
    res.json(410, text_);
    return true;
}

handler_result deliveries_admin::put(net::request& req, net::response& res, const net::route& r, const principal& who,
                                     net::answer_ticket ticket) {
    auto parsed = parse_delivery_request(req.body());
    if (!parsed) {
        res.error(400, parsed.error().reason);
        return handler_result::answered;
    }
    // SPEC §9: a literal address is checked now; a name is checked by the engine once resolved
    auto literal = net::resolve_numeric(parsed->parsed.host, parsed->parsed.port);
    if (literal && !net::allowed(*literal, allow_)) {
        res.error(400, "address not allowed: the url's host is in a range SPEC 9 refuses (see --deliveries-allow)");
        return handler_result::answered;
    }
    // an app's admin token makes deliveries within its own reach, as it makes tokens
    if (who.kind == principal_kind::app_token && !parsed->prefix.starts_with(who.prefix)) {
        res.error(403, "prefix outside the token's own prefix");
        return handler_result::answered;
    }
    // SPEC §9: the CA text is parsed now, on the admin path, and stored as its certificates alone
    if (!parsed->ca_pem.empty()) {
        auto certificates = crypto::ca_certificates_pem(parsed->ca_pem, max_delivery_ca_stored_bytes);
        if (!certificates) {
            const bool no_module = certificates.error() != crypto::errc::unusable_file;
            res.error(no_module ? 503 : 400,
                      std::string(no_module ? "cannot check ca_pem: " : "ca_pem: ") + certificates.error());
            return handler_result::answered;
        }
        parsed->ca_pem = std::move(*certificates);
    }
    if (const store::document* doc = find(r.app, r.key)) return update(*parsed, *doc, res, r, who, ticket);
    return create(*parsed, res, r, who, ticket);
}

handler_result deliveries_admin::create(delivery_request& req, net::response& res, const net::route& r,
                                        const principal& who, net::answer_ticket ticket) {
    feed_cursor pos;
    if (refuse_since(res, req.since, &pos)) return handler_result::answered;
    app_entry* app = apps_.find(r.app);
    PERCORE_ASSERT(app != nullptr);  // handle() answered 404 for an app that does not exist
    if (!app->reserve(app_object::delivery, max_app_deliveries)) {
        res.error(507, "limit: deliveries");
        return handler_result::answered;
    }
    delivery_record d;
    d.url = std::move(req.url);
    d.prefix = std::move(req.prefix);
    d.seal = req.seal;
    d.seal_key_shown = req.seal;
    d.ca_pem = std::move(req.ca_pem);
    d.secrets = make_delivery_secrets();
    d.cursor = cursor_text(pos);
    d.created_unix_ms = d.updated_unix_ms = d.cursor_moved_unix_ms = unix_now_ms();
    pending_op op;
    op.kind = op_kind::create;
    op.name.assign(r.key);
    op.app.assign(r.app);
    op.by = acting_as(who);
    op.entry = app;
    op.signing_secret = d.secrets.signing_secret;
    if (d.seal) append_hex(op.seal_key_hex, d.secrets.seal_key);
    store::precondition absent;
    absent.has_if_none_match = true;
    absent.if_none_match_any = true;  // a concurrent creation is refused, never overwritten
    submit(delivery_key(r.app, r.key), encode_delivery_record(d), std::move(absent), std::move(op), ticket);
    d.secrets.seal_key.fill(0);
    d.secrets.signing_secret.assign(d.secrets.signing_secret.size(), '\0');
    return handler_result::pending;
}

handler_result deliveries_admin::update(delivery_request& req, const store::document& doc, net::response& res,
                                        const net::route& r, const principal& who, net::answer_ticket ticket) {
    const std::string_view reach = who.kind == principal_kind::app_token ? std::string_view(who.prefix) : "";
    auto record = updated_record(req, doc, reach);
    if (!record) {
        res.error(record.error().status, record.error().reason);
        return handler_result::answered;
    }
    if (refuse_since(res, req.since, nullptr)) return handler_result::answered;  // checked; the cursor is kept
    pending_op op;
    op.kind = op_kind::update;
    op.name.assign(r.key);
    op.app.assign(r.app);
    op.by = acting_as(who);
    op.reach.assign(reach);
    op.request = std::move(req);
    op.ticket = ticket;
    store::precondition same;
    same.has_if_match = true;
    same.if_match.push_back(doc.etag_version());
    submit(delivery_key(r.app, r.key), std::move(*record), std::move(same), std::move(op), ticket);
    return handler_result::pending;
}

shards::result<std::string> deliveries_admin::updated_record(const delivery_request& req, const store::document& doc,
                                                            std::string_view reach) {
    auto d = decode_delivery_record(doc.value());
    if (!d) return std::unexpected(problem{500, "malformed delivery record"});
    if (!d->prefix.starts_with(reach)) return std::unexpected(problem{403, outside_reach});
    if (req.seal && !d->seal_key_shown)
        return std::unexpected(problem{
            409, "seal can be turned on only at creation (its key is shown once): delete the delivery and create it again"});
    // a batch built for another receiver or prefix is never sent to this one (review M4)
    if (d->url != req.url || d->prefix != req.prefix || d->seal != req.seal || d->ca_pem != req.ca_pem ||
        !d->ca_file.empty())
        d->batch_id.clear();
    d->url = req.url;
    d->prefix = req.prefix;
    d->seal = req.seal;
    d->ca_pem = req.ca_pem;
    d->ca_file.clear();  // a record from before ca_pem: its path is dropped, never read
    d->state = delivery_state::active;
    d->attempts = 0;
    d->last_error.reset();
    d->next_attempt_unix_ms = 0;
    d->updated_unix_ms = unix_now_ms();
    return encode_delivery_record(*d);
}

// The update lost its precondition: applied again on the record as it is now (false: gone, or
// the newer record refuses it; the caller answers 409).
bool deliveries_admin::retry_update(pending_op& op) {
    if (op.retries >= max_delivery_update_retries) return false;
    const store::document* doc = find(op.app, op.name);
    if (!doc) return false;
    auto record = updated_record(op.request, *doc, op.reach);
    if (!record) return false;
    ++op.retries;
    store::precondition same;
    same.has_if_match = true;
    same.if_match.push_back(doc->etag_version());
    std::string key = delivery_key(op.app, op.name);
    const net::answer_ticket ticket = op.ticket;
    submit(std::move(key), std::move(*record), std::move(same), std::move(op), ticket);
    return true;
}

handler_result deliveries_admin::erase(net::response& res, const net::route& r, const principal& who,
                                       net::answer_ticket ticket) {
    const store::document* doc = find(r.app, r.key);
    if (!doc) {
        res.error(404, "no such delivery");
        return handler_result::answered;
    }
    if (!listed_for(who, *doc)) {
        res.error(403, outside_reach);
        return handler_result::answered;
    }
    pending_op op;
    op.kind = op_kind::erase;
    op.name.assign(r.key);
    op.app.assign(r.app);
    op.by = acting_as(who);
    op.entry = apps_.find(r.app);
    store::precondition same;
    same.has_if_match = true;
    same.if_match.push_back(doc->etag_version());
    submit(delivery_key(r.app, r.key), {}, std::move(same), std::move(op), ticket);
    return handler_result::pending;
}

void deliveries_admin::submit(std::string key, std::string value, store::precondition pre, pending_op op,
                              net::answer_ticket ticket) {
    op.tag = write_ticket{stores_.self(), ticket}.encode();
    const bool erase = op.kind == op_kind::erase;
    pending_.push_back(std::move(op));
    submit_catalog_write(stores_, pending_.back().tag, std::move(key), value, std::move(pre), erase);
}

std::optional<net::simple_answer> deliveries_admin::write_done(const store::write_result& result) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    for (std::size_t i = 0; i < pending_.size(); ++i) {
        if (pending_[i].tag != result.tag) continue;
        pending_op op = std::move(pending_[i]);
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
        return finish(op, result);
    }
    PERCORE_ASSERT(!"a delivery record's result with no pending request");
    return net::simple_answer{500, false, 0, "internal error"};
}

std::optional<net::simple_answer> deliveries_admin::finish(pending_op& op, const store::write_result& result) {
    using store::write_outcome;
    const bool ok = result.outcome == write_outcome::created || result.outcome == write_outcome::replaced ||
                    result.outcome == write_outcome::deleted;
    if (!ok && op.kind == op_kind::create && op.entry) op.entry->release(app_object::delivery);
    if (ok && op.kind == op_kind::erase && op.entry) op.entry->release(app_object::delivery);
    if (!ok && op.kind == op_kind::erase && result.outcome == write_outcome::not_found)
        return net::simple_answer{404, false, 0, "no such delivery"};
    if (!ok && result.outcome == write_outcome::precondition_failed) {
        if (op.kind == op_kind::update && retry_update(op)) return std::nullopt;
        return net::simple_answer{409, false, 0, "the delivery changed meanwhile; try again"};
    }
    if (!ok) return write_answer(result.outcome, result.version, result.current_exists);
    // app and delivery names are [a-z0-9_-]: nothing in the line comes from a client's free text
    log_line("admin: delivery " + op.app + "/" + op.name +
             (op.kind == op_kind::create ? " created" : op.kind == op_kind::update ? " changed" : " deleted") + " by " +
             op.by);
    if (op.kind != op_kind::create) return net::simple_answer{204, false, 0, nullptr};
    text_.assign("{\"name\":");
    append_json_string(text_, op.name);
    text_.append(",\"signing_secret\":");
    append_json_string(text_, op.signing_secret);
    if (!op.seal_key_hex.empty()) {
        text_.append(",\"seal_key\":");
        append_json_string(text_, op.seal_key_hex);
    }
    text_.push_back('}');
    // the secrets are kept nowhere else once shown (the answer copies the body when it is sent)
    op.signing_secret.assign(op.signing_secret.size(), '\0');
    op.seal_key_hex.assign(op.seal_key_hex.size(), '\0');
    return net::simple_answer{201, false, 0, nullptr, text_};
}

bool deliveries_admin::holds(std::uint64_t tag) const {
    return std::any_of(pending_.begin(), pending_.end(), [tag](const pending_op& op) { return op.tag == tag; });
}

}  // namespace percore::shards
