#include "shards/deliveries/delivery_engine.hpp"

#include <limits>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "crypto/loader.hpp"
#include "net/resolver.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/deliveries/delivery_batch.hpp"
#include "shards/feed/feed_waits.hpp"
#include "shards/base/limits.hpp"
#include "shards/runtime/check.hpp"
#include "shards/base/write_ticket.hpp"

namespace percore::shards {

// One delivery: its record as last seen in the store, and what it is doing now.
struct delivery_engine::run final : net::client_events {
    enum class phase : std::uint8_t {
        idle,        // looks for a batch when due
        persisting,  // a record write is in flight (pending_tag)
        sending,     // an exchange is in flight (client)
        resolving,   // its host's address is being looked up (resolving)
    };

    run(delivery_engine& e, std::string k) : engine(e), key(std::move(k)) {}
    void on_exchange_done(const net::client_outcome& outcome) override { engine.exchange_done(*this, outcome); }

    delivery_engine& engine;
    std::string key;  // the catalog key: "_percore\0delivery/{app}/{name}"
    std::string app, name;
    delivery_record record;
    std::uint64_t version = 0;  // the record's ETag version in the store (what If-Match names)
    bool gone = false;          // the record was deleted: stop once nothing is in flight
    phase now = phase::idle;
    std::uint64_t pending_tag = 0;
    delivery_record after_persist;  // the record once the write in flight is durable
    bool send_after_persist = false;
    std::uint64_t changes_seen = page_at_next_step;  // the app's changed_batches at the last look
    std::int64_t not_before_ns = 0;                   // a failed record write: look again after this
    // the batch in flight: built once per batch id (a retry in this process sends the same bytes;
    // after a restart it is built again from the cursor: the same changes, maybe a later cursor)
    std::string body_batch_id;
    std::string body;
    signed_batch attempt;  // the try on the wire: its headers, and its sealed body (the client borrows it)
    std::string end_cursor;
    std::uint32_t batch_changes = 0;
    bool batch_full = false;  // more may wait behind it: the next is read at once, no linger
    // the connection
    std::optional<net::socket_address> peer;  // the receiver's address, for peer_for
    std::string peer_for;                     // "host:port" it was resolved for
    net::resolve_handle resolving;            // a lookup in flight (cancelled with the run)
    std::string connected_url;  // the url and ca_pem the transport was made for
    std::unique_ptr<net::client_transport> transport;
    std::unique_ptr<net::client_connection> client;
};

namespace {

constexpr std::int64_t record_retry_ns = 1'000'000'000;  // a record write that failed (disk full): 1 s
// A batch whose next try is at least this far away is not held meanwhile (release_waiting_batch):
// the 5 s first retry keeps its bytes; from the 5 min one on (SPEC §9), the try builds it again.
constexpr std::int64_t batch_release_wait_ms = 60'000;
constexpr std::string_view address_refused = "address not allowed";  // SPEC §9's last_error
// A record written before ca_pem names a ca_file: it fails every try until a PUT gives ca_pem
// (docs/decisions.md, "ca_pem, not ca_file").
constexpr std::string_view ca_file_not_read = "ca_file is no longer read; PUT the delivery with ca_pem";

std::int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// "{app}/{name}" after the records' prefix.
bool split_key(std::string_view key, std::string& app, std::string& name) {
    if (!key.starts_with(delivery_records)) return false;
    std::string_view rest = key.substr(delivery_records.size());
    std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == rest.size()) return false;
    app.assign(rest.substr(0, slash));
    name.assign(rest.substr(slash + 1));
    return true;
}

std::string host_header(const delivery_url& u) {
    const bool default_port = u.port == (u.https ? 443 : 80);
    return default_port ? u.host : u.host + ":" + std::to_string(u.port);
}

}  // namespace

delivery_engine::delivery_engine(store_client& stores, app_registry& apps, feed_identity identity,
                                 delivery_transports& transports, delivery_timing timing, shard_metrics& metrics,
                                 runtime::loop& loop, const net::cidr_list& allow)
    : stores_(stores), shard_(stores.self()), apps_(apps), feed_(stores, identity), transports_(transports), timing_(timing),
      jitter_(static_cast<std::uint32_t>(steady_now_ns())), metrics_(metrics), loop_(loop), allow_(allow) {}

delivery_engine::~delivery_engine() = default;

void delivery_engine::begin_stop() {
    PERCORE_REQUIRES(on_shard_thread(shard_));
    stopped_ = true;
    for (auto& r : runs_)
        if (r->client && !r->client->busy()) r->client->close();
}

// The records of this shard's store, when it published since the last look: new ones start, changed
// ones are taken as they are (when nothing is in flight: a write in flight then fails its If-Match
// and takes them), deleted ones stop. runs_ is kept in key order, as the snapshot's cursor yields
// the records, so one merge of the two is a scan: O(deliveries) per published batch, not a search
// of runs_ for each record (security review M1: 5,000 deliveries were 12.5 M compares a batch).
void delivery_engine::scan() {
    const store::snapshot* snap = stores_.current(shard_);
    if (!snap || snap->watched_sequence() == scanned_sequence_) return;
    scanned_sequence_ = snap->watched_sequence();
    merged_.clear();
    merged_.reserve(runs_.size());
    std::size_t i = 0;
    auto keep_gone_before = [&](std::string_view key) {
        for (; i < runs_.size() && (key.empty() || runs_[i]->key < key); ++i) {
            runs_[i]->gone = true;
            merged_.push_back(std::move(runs_[i]));
        }
    };
    store::snapshot::cursor c;
    for (c.seek(*snap, delivery_records, false); c.valid() && c.doc().key().starts_with(delivery_records); c.next()) {
        const store::document& doc = c.doc();
        if (doc.in_file()) continue;  // records are far below file_value_min_bytes
        keep_gone_before(doc.key());
        if (i < runs_.size() && runs_[i]->key == doc.key()) {
            merged_.push_back(std::move(runs_[i++]));
        } else {
            auto fresh = std::make_unique<run>(*this, std::string(doc.key()));
            if (!split_key(fresh->key, fresh->app, fresh->name)) continue;
            merged_.push_back(std::move(fresh));
        }
        take_record(*merged_.back(), doc);
    }
    keep_gone_before(std::string_view());
    runs_.swap(merged_);
    merged_.clear();
    std::erase_if(runs_, [](const std::unique_ptr<run>& r) { return r->gone && r->now == run::phase::idle; });
    PERCORE_ASSERT(std::is_sorted(runs_.begin(), runs_.end(), [](const auto& a, const auto& b) { return a->key < b->key; }));
}

// A record the scan found for run r: taken when it changed and nothing is in flight.
void delivery_engine::take_record(run& r, const store::document& doc) {
    r.gone = false;
    if (r.version == doc.etag_version() || r.now != run::phase::idle) return;
    auto d = decode_delivery_record(doc.value());
    if (!d) {
        r.gone = true;  // not a record percore wrote: never guessed at
        return;
    }
    adopt(r, *d, doc.etag_version());
}

void delivery_engine::adopt(run& r, const delivery_record& d, std::uint64_t version) {
    const bool target_changed = d.url != r.record.url || d.ca_pem != r.record.ca_pem || d.ca_file != r.record.ca_file;
    // a body built for another receiver, prefix or sealing is never sent again (review M4): the
    // next batch is read from the cursor (a PUT that changed them also cleared batch_id)
    if (target_changed || d.prefix != r.record.prefix || d.seal != r.record.seal) {
        r.body_batch_id.clear();
        r.body.clear();
    }
    r.record = d;
    r.version = version;
    r.changes_seen = page_at_next_step;  // a PUT may have made it active again: look at once
    if (target_changed && r.client && !r.client->busy()) {
        r.client->close();
        r.client.reset();
        r.transport.reset();
    }
}

bool delivery_engine::app_changed(run& r) {
    app_entry* app = apps_.find(r.app);
    if (!app) {
        // No entry (--auth off, restarted with no document of the app left): one look, then none
        // until the app's counters move (from 0) once it is written again.
        if (r.changes_seen != page_at_next_step) return false;
        r.changes_seen = 0;
        return true;
    }
    std::uint64_t changes = 0;
    for (unsigned s = 0; s < app->shard_count(); ++s) changes += app->counters(s).changed_batches.load(std::memory_order_acquire);
    if (changes == r.changes_seen) return false;
    r.changes_seen = changes;
    return true;
}

std::size_t delivery_engine::step(time_point now) {
    if (stopped_) return 0;
    PERCORE_REQUIRES(on_shard_thread(shard_));
    const std::int64_t now_ns = nanoseconds_of(now);
    last_step_ns_ = now_ns;
    scan();
    if (runs_.empty() && told_runs_ == 0) return 0;  // the common case: this shard runs no delivery
    std::size_t work = 0;
    for (auto& r : runs_) {
        if (r->client) r->client->tick(now_ns);
        if (r->now != run::phase::idle || r->gone) continue;
        const auto before = r->now;
        advance(*r, now_ns);
        if (r->now != before) ++work;
    }
    std::erase_if(runs_, [](const std::unique_ptr<run>& r) { return r->gone && r->now == run::phase::idle; });
    if (signal_ && runs_.size() != told_runs_) {
        told_runs_ = runs_.size();
        signal_->set_deliveries(shard_, static_cast<std::uint32_t>(told_runs_));
    }
    return work;
}

// The end of the soonest pause after a partial batch (delivery_linger, 100 ms: finer than the loop's
// tick, so the shard must be told); record retries are wall-clock seconds away and ride the tick.
shard_task::time_point delivery_engine::wake_by() const {
    std::int64_t at = std::numeric_limits<std::int64_t>::max();
    for (const auto& r : runs_)
        if (r->now == run::phase::idle && r->not_before_ns > last_step_ns_) at = std::min(at, r->not_before_ns);
    if (at == std::numeric_limits<std::int64_t>::max()) return time_point::max();
    return time_point(std::chrono::duration_cast<time_point::duration>(std::chrono::nanoseconds(at)));
}

bool delivery_engine::has_work(time_point now) const {
    if (stopped_ || runs_.empty()) return false;
    const std::int64_t now_ns = nanoseconds_of(now);
    const store::snapshot* snap = stores_.current(shard_);
    if (snap && snap->watched_sequence() != scanned_sequence_) return true;
    const std::int64_t now_ms = unix_now_ms();
    for (const auto& r : runs_) {
        if (r->now != run::phase::idle || now_ns < r->not_before_ns) continue;
        const delivery_record& d = r->record;
        if (d.state == delivery_state::failed || d.state == delivery_state::disabled) continue;
        if (d.state == delivery_state::retrying) {  // its timer, nothing else (advance() waits for it too)
            if (now_ms >= d.next_attempt_unix_ms) return true;
            continue;
        }
        if (d.state == delivery_state::active && !d.batch_id.empty()) return true;
        if (d.state == delivery_state::active && r->changes_seen == page_at_next_step) return true;
        const app_entry* app = apps_.find(r->app);
        if (!app) continue;
        std::uint64_t changes = 0;
        for (unsigned s = 0; s < app->shard_count(); ++s)
            changes += app->counters(s).changed_batches.load(std::memory_order_acquire);
        if (changes != r->changes_seen) return true;
    }
    return false;
}

// An idle delivery: a due retry sends its batch again; an active one with changes after its cursor
// starts a batch (its id written first); one whose cursor the feed no longer holds fails.
void delivery_engine::advance(run& r, std::int64_t now_ns) {
    PERCORE_REQUIRES(r.now == run::phase::idle && !r.gone);
    if (now_ns < r.not_before_ns) return;
    const delivery_record& d = r.record;
    if (d.state == delivery_state::failed || d.state == delivery_state::disabled) return;
    if (d.state == delivery_state::retrying && unix_now_ms() < d.next_attempt_unix_ms) return;
    const bool resend = !d.batch_id.empty();
    PERCORE_ASSERT(d.state == delivery_state::active || d.state == delivery_state::retrying);
    if (!resend && !app_changed(r)) return;
    if (!feed_.start(d.cursor)) {  // resharded since (rebased), or behind the retention (failed)
        r.body_batch_id.clear();
        auto rebased = rebase_after_reshard(feed_, d.cursor);
        delivery_record next = d;
        if (rebased) next.cursor = std::move(*rebased);
        persist(r, rebased ? std::move(next) : fell_behind(d, unix_now_ms()), false);
        return;
    }
    if (resend && r.body_batch_id == d.batch_id) {  // the same bytes on every try in this process
        send(r, now_ns);
        return;
    }
    if (!begin_batch(r)) {
        if (resend) persist(r, with_new_batch(d, std::string()), false);  // nothing left to send
        return;
    }
    if (resend) {
        r.body_batch_id = d.batch_id;
        send(r, now_ns);
        return;
    }
    std::string id = make_batch_id();
    r.body_batch_id = id;
    persist(r, with_new_batch(d, std::move(id)), true);
}

// A cursor from before a resharding (this directory, another layout) names a version per old shard:
// every change after it on any old shard has a higher version than the lowest of them, so that one
// version for every new shard resends some changes (at least once) and misses none — unless the
// feed no longer holds changes that far back (then there is no cursor to give).
std::optional<std::string> rebase_after_reshard(const change_feed& feed, std::string_view cursor) {
    auto old = parse_cursor(cursor);
    const feed_identity id = feed.identity();
    if (!old || old->directory_id != id.directory_id || old->versions.empty()) return std::nullopt;
    if (old->generation == id.generation) return std::nullopt;  // same layout: expired, not resharded
    const std::uint64_t lowest = *std::min_element(old->versions.begin(), old->versions.end());
    auto now = feed.start("0");
    if (!now) return std::nullopt;
    feed_cursor rebased{id.directory_id, id.generation, std::vector<std::uint64_t>(now->versions.size(), lowest)};
    std::string text = cursor_text(rebased);
    if (!feed.start(text)) return std::nullopt;  // below a shard's floor: changes after it are gone
    return text;
}

// The batch after the record's cursor into r.body; false when there is none (or it cannot be read).
bool delivery_engine::begin_batch(run& r) {
    PERCORE_REQUIRES(r.now == run::phase::idle);
    r.body_batch_id.clear();  // r.body is rebuilt (or left empty) below
    auto pos = feed_.start(r.record.cursor);
    if (!pos) return false;
    std::string app_prefix = r.app;
    app_prefix.push_back('\0');
    app_prefix.append(r.record.prefix);
    delivery_batch batch(r.body, r.app, r.name);
    auto added = fill_batch(feed_, *pos, app_prefix, max_delivery_batch_changes, batch);
    if (!added || *added == 0) return false;  // a value that cannot be read: tried again next look
    r.end_cursor = cursor_text(*pos);
    r.batch_changes = *added;
    r.batch_full = *added == max_delivery_batch_changes || batch.value_bytes() * 2 >= max_delivery_batch_value_bytes;
    batch.finish(r.end_cursor);
    return true;
}

// The delivery's connection for its url: kept while the url and ca_pem stay; made once the host's
// address is known (IP literals at once; names through net::resolver, off the loop) and allowed
// (SPEC §9: the very address connected to, checked at every resolution).
result<delivery_engine::link> delivery_engine::connect(run& r) {
    const std::string target = r.record.url + '\n' + r.record.ca_pem;
    if (r.client && r.connected_url == target) return link::ready;
    r.client.reset();
    r.transport.reset();
    auto url = parse_delivery_url(r.record.url);
    if (!url) return std::unexpected("url: " + url.error().reason);
    const std::string host_port = url->host + ":" + std::to_string(url->port);
    if (r.peer_for != host_port) {
        r.peer.reset();
        if (auto numeric = net::resolve_numeric(url->host, url->port)) {
            if (!net::allowed(*numeric, allow_)) return link::refused;
            r.peer = *numeric;
            r.peer_for = host_port;
        } else {
            resolve(r, url->host, url->port, host_port);
            return link::resolving;
        }
    }
    auto made = transports_.make(*url, r.record.ca_pem, *r.peer);
    if (!made) return std::unexpected(std::move(made.error()));
    r.transport = std::move(*made);
    r.client = std::make_unique<net::client_connection>(*r.transport, r);
    r.connected_url = target;
    return link::ready;
}

// Looks the host up off the loop; the delivery waits (phase resolving) and tries again once the
// answer came, or counts a failed attempt when there is none.
void delivery_engine::resolve(run& r, const std::string& host, std::uint16_t port, const std::string& host_port) {
    r.now = run::phase::resolving;
    run* target = &r;  // runs live until idle and gone; a run's handle cancels with it
    r.resolving = net::resolver::shared().resolve(loop_, host, port, [this, target, host_port](net::resolve_result res) {
        target->now = run::phase::idle;
        if (res && net::allowed(*res, allow_)) {
            target->peer = *res;
            target->peer_for = host_port;
            return;
        }
        add(metrics_.delivery_attempts);
        const std::string why = res ? std::string(address_refused) : "resolving the host: " + res.error();
        attempt_failed(*target, attempt_outcome{0, why}, unix_now_ms(), "connect_failed");
    });
}

// The batch signed (and sealed) for a try at `now_ms`.
result<signed_batch> delivery_engine::sign(run& r, std::int64_t now_ms) {
    auto api = crypto::load_crypto_module();
    if (!api) return std::unexpected("crypto module: " + std::string(api.error().message()));
    return sign_batch(**api, r.record, r.record.batch_id, now_ms / 1000, r.body);
}

// One try of the batch in flight: signed now, sent on the delivery's connection; an attempt that
// cannot even start (no crypto module, an unusable url or ca_pem, a record's ca_file) counts as a
// failed one.
void delivery_engine::send(run& r, std::int64_t now_ns) {
    PERCORE_REQUIRES(r.now == run::phase::idle && !r.record.batch_id.empty());
    const std::int64_t now_ms = unix_now_ms();
    if (!r.record.ca_file.empty()) {  // written before ca_pem: the path is never read (review M5)
        add(metrics_.delivery_attempts);
        attempt_failed(r, attempt_outcome{0, std::string(ca_file_not_read)}, now_ms, "other");
        return;
    }
    const result<link> l = connect(r);
    if (l && *l == link::resolving) return;  // the attempt starts once the address is known
    add(metrics_.delivery_attempts);
    if (l && *l == link::refused) {
        attempt_failed(r, attempt_outcome{0, std::string(address_refused)}, now_ms, "connect_failed");
        return;
    }
    auto ready = l ? sign(r, now_ms) : result<signed_batch>(std::unexpected(l.error()));
    if (!ready) {
        attempt_failed(r, attempt_outcome{0, ready.error().reason}, now_ms, "other");
        return;
    }
    r.attempt = std::move(*ready);
    const auto url = parse_delivery_url(r.record.url);
    PERCORE_ASSERT(url.has_value());  // connect() made a link for this very url
    const std::string host = host_header(*url);
    const net::header_field headers[] = {
        {"Content-Type", r.attempt.content_type},     {"webhook-id", r.attempt.id},
        {"webhook-timestamp", r.attempt.timestamp},   {"webhook-signature", r.attempt.signature},
        {"User-Agent", "percore"}};
    net::client_request req;
    req.target = url->target;
    req.host = host;
    req.headers = headers;
    req.body = r.attempt.body(r.body);  // both stay in the run until the exchange ends
    r.now = run::phase::sending;
    r.client->send(req, now_ns + timing_.attempt_timeout().count());  // copies the head, borrows the body
}

void delivery_engine::attempt_failed(run& r, const attempt_outcome& outcome, std::int64_t now_ms,
                                     std::string_view cause) {
    const auto* at = std::find(delivery_failure_causes.begin(), delivery_failure_causes.end(), cause);
    if (at == delivery_failure_causes.end()) at = delivery_failure_causes.end() - 1;  // "other"
    add(metrics_.delivery_failures[static_cast<std::size_t>(at - delivery_failure_causes.begin())]);
    std::uniform_real_distribution<double> draw(0.0, 1.0);
    persist(r, after_attempt(r.record, outcome, r.end_cursor, now_ms, timing_, draw(jitter_)), false);
}

void delivery_engine::exchange_done(run& r, const net::client_outcome& outcome) {
    PERCORE_REQUIRES(r.now == run::phase::sending);
    r.now = run::phase::idle;
    const std::int64_t now_ms = unix_now_ms();
    if (stopped_) return;  // the record stays: the batch is sent again after the restart
    attempt_outcome result;
    if (outcome.ok()) {
        result.status = outcome.status;
    } else {
        result.error = net::to_string(outcome.error);
        if (outcome.text && *outcome.text) result.error.append(": ").append(outcome.text);
        if (outcome.error == net::client_error::tls_failed && r.transport && !r.transport->open_failure().empty())
            result.error.append(": ").append(r.transport->open_failure());
        if (result.error.size() > max_delivery_error_bytes) result.error.resize(max_delivery_error_bytes);
        if (outcome.system_error != 0) result.error.append(": ").append(std::strerror(outcome.system_error));
        result.head_status = outcome.status;
    }
    if (result.status >= 200 && result.status < 300) {
        add(metrics_.delivery_batches_delivered);
        add(metrics_.delivery_changes_sent, r.batch_changes);
        std::uniform_real_distribution<double> draw(0.0, 1.0);
        persist(r, after_attempt(r.record, result, r.end_cursor, now_ms, timing_, draw(jitter_)), false);
        r.changes_seen = page_at_next_step;  // more may wait after this batch
        if (!r.batch_full) r.not_before_ns = steady_now_ns() + std::chrono::nanoseconds(delivery_linger).count();
        return;
    }
    if (outcome.error == net::client_error::connect_failed) r.peer_for.clear();  // look the name up again
    attempt_failed(r, result, now_ms, outcome.ok() ? "status" : net::to_string(outcome.error));
}

// Writes `next` as the delivery's record (If-Match the version seen); the delivery waits for it.
void delivery_engine::persist(run& r, delivery_record next, bool send_after) {
    PERCORE_REQUIRES(r.now != run::phase::persisting && r.now != run::phase::sending);
    if (r.gone) return;
    r.pending_tag = write_ticket::background(stores_.self(), issuer::delivery, ++write_sequence_).encode();
    r.after_persist = std::move(next);
    r.send_after_persist = send_after;
    r.now = run::phase::persisting;
    store::precondition pre;
    pre.has_if_match = true;
    pre.if_match.push_back(r.version);
    submit_catalog_write(stores_, r.pending_tag, r.key, encode_delivery_record(r.after_persist), std::move(pre), false);
}

void delivery_engine::write_done(const store::write_result& result) {
    PERCORE_REQUIRES(write_ticket::decode(result.tag).from() == issuer::delivery);
    PERCORE_REQUIRES(on_shard_thread(shard_));
    const std::uint64_t tag = result.tag;
    auto it = std::find_if(runs_.begin(), runs_.end(), [tag](const auto& r) {
        return r->now == run::phase::persisting && r->pending_tag == tag;
    });
    if (it == runs_.end()) return;  // its delivery was dropped meanwhile (record deleted)
    run& r = **it;
    r.now = run::phase::idle;
    r.pending_tag = 0;
    const bool written =
        result.outcome == store::write_outcome::replaced || result.outcome == store::write_outcome::created;
    if (!written) {
        // An administrator's change came first (precondition_failed): take the record as it is now.
        // A failed write (disk full): the record stays as it was; look again in a second.
        if (result.outcome != store::write_outcome::precondition_failed) r.not_before_ns = steady_now_ns() + record_retry_ns;
        r.version = 0;
        scanned_sequence_ = 0;
        return;
    }
    r.record = std::move(r.after_persist);
    r.version = result.version;
    release_waiting_batch(r);
    if (r.send_after_persist && !stopped_) send(r, steady_now_ns());
}

// A delivery that waits a minute or more for its next try does not hold its batch meanwhile: up to
// 1 MiB of values, or one large document alone (a 16 MiB one is ~21 MiB of base64, twice when
// sealed), for up to ~27 h of retries (security review M1: 100 deliveries to a dead receiver held
// ~2 GiB). The try builds it again from the record's cursor, as after a restart: the same batch
// id, the same changes (maybe more, when the first was not full).
void delivery_engine::release_waiting_batch(run& r) {
    if (r.record.state != delivery_state::retrying || r.body.empty()) return;
    if (r.record.next_attempt_unix_ms - unix_now_ms() < batch_release_wait_ms) return;
    std::string().swap(r.body);
    r.attempt = signed_batch{};
    r.body_batch_id.clear();
}

std::size_t delivery_engine::batch_bytes_held() const {
    std::size_t n = 0;
    for (const auto& r : runs_) n += r->body.size() + r->attempt.sealed.size();
    return n;
}

}  // namespace percore::shards
