#include "shards/follower/follower.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "net/resolve.hpp"
#include "shards/base/json_text.hpp"
#include "shards/apps/catalog.hpp"
#include "shards/feed/feed_cursor.hpp"
#include "shards/deliveries/deliveries_admin.hpp"
#include "shards/deliveries/delivery_batch.hpp"
#include "shards/deliveries/delivery_record.hpp"
#include "shards/base/encoding.hpp"
#include "shards/follower/page_check.hpp"
#include "shards/runtime/check.hpp"
#include "shards/base/write_ticket.hpp"
#include "store/document.hpp"

namespace percore::shards {

namespace {

const std::string cursor_key = std::string(follower_records) + "cursor";

// Erasures of local keys the primary does not have, in flight at once (a resync's last step).
constexpr std::size_t max_extra_erasures_in_flight = 256;

void log_line(std::string_view text) {
    std::string line = "percore: follower: ";
    line.append(text);
    line.push_back('\n');
    ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    (void)n;
}

// The replication page's largest answer (SPEC §10): max_replication_page_bytes, head and body
// together, the body kept whole for read_replication_page. A larger answer ends the exchange
// too_large as soon as its Content-Length (or its bytes) say so: the rest is not read.
net::client_limits page_limits() {
    net::client_limits l;
    l.max_kept_body_bytes = max_replication_page_bytes;
    l.max_response_bytes = max_replication_page_bytes;
    l.read_buffer_bytes = 64 * 1024;
    return l;
}

const std::string* string_member(const json_value& object, std::string_view name) {
    const json_value* v = object.find(name);
    return v && v->what == json_value::kind::string ? &v->text : nullptr;
}

}  // namespace

double follower_status::lag_seconds(std::int64_t now_unix_ms) const {
    const std::int64_t since = behind_since_ms.load(std::memory_order_relaxed);
    if (since == 0 || now_unix_ms <= since) return 0;
    return static_cast<double>(now_unix_ms - since) / 1000.0;
}

// Counts the copy's documents and bytes into its app's usage (GET /_apps/{app}) and refuses
// nothing: the primary already checked the quota, and a follower holds what the primary holds.
class follower::copy_gate final : public store::write_gate {
public:
    explicit copy_gate(app_entry& app) : app_(app) {}
    std::uint8_t try_apply(std::int64_t documents, std::int64_t bytes) override {
        app_.add_recovered(documents, bytes);
        return 0;
    }
    void undo(std::int64_t documents, std::int64_t bytes) override { app_.add_recovered(-documents, -bytes); }

private:
    app_entry& app_;
};

follower::follower(store_client& stores, app_registry& apps, const server_view& server,
                   delivery_transports& transports, runtime::loop& loop, follow_config config,
                   follower_status& status, bool auth_on)
    : stores_(stores), apps_(apps), server_(server), transports_(transports), loop_(loop),
      config_(std::move(config)), status_(status), auth_on_(auth_on) {
    auth_header_ = "Bearer " + config_.token;
    status_.behind_since_ms.store(unix_now_ms(), std::memory_order_relaxed);
}

follower::~follower() = default;

std::size_t follower::step(time_point now) {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    const std::int64_t now_ns = nanoseconds_of(now);
    switch (now_) {
    case phase::start:
        if (!server_.serving()) return 0;  // every shard's store recovered: the cursor can be read
        load_cursor();
        now_ = phase::waiting;
        return 1;
    case phase::waiting:
        if (now_ns < retry_at_ns_) return 0;
        send(now_ns);
        return 1;
    case phase::exchanging:
        if (client_) client_->tick(now_ns);
        return 0;
    default:
        return 0;
    }
}

bool follower::has_work(time_point now) const {
    const std::int64_t now_ns = nanoseconds_of(now);
    return (now_ == phase::start && server_.serving()) || (now_ == phase::waiting && now_ns >= retry_at_ns_);
}

void follower::begin_stop() {
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    now_ = phase::stopped;
    resolving_ = {};
    client_.reset();
    transport_.reset();
}

// The stored cursor, if it was written for this primary; otherwise (or mid-resync) a full copy.
void follower::load_cursor() {
    PERCORE_REQUIRES(now_ == phase::start);
    const std::uint64_t led = recorded_led_epoch(stores_);
    if (led != 0 && led != config_.epoch) {
        if (start_capture(led))
            begin_resync("this board led epoch " + std::to_string(led) + ": what it holds that differs is kept");
        return;
    }
    const store::snapshot* snap = stores_.current(stores_.owner_of(cursor_key));
    const store::document* doc = snap ? snap->find(cursor_key) : nullptr;
    std::string scratch;
    if (doc) {
        auto value = document_value(*snap, *doc, scratch);
        auto record = value ? parse_json(*value) : std::unexpected(value.error().reason);
        const std::string* primary = record ? string_member(*record, "primary") : nullptr;
        const std::string* cursor = record ? string_member(*record, "cursor") : nullptr;
        const json_value* resync = record ? record->find("resync") : nullptr;
        if (primary && cursor && *primary == config_.url && !(resync && resync->flag)) {
            cursor_ = *cursor;
            stored_cursor_ = cursor_;
            status_.position.store(cursor_position(cursor_), std::memory_order_relaxed);
            log_line("following " + config_.url + " from the stored cursor");
            return;
        }
    }
    begin_resync(doc ? "the stored cursor is of another primary or of an unfinished copy" : "no stored cursor");
}

void follower::begin_resync(std::string_view why) {
    log_line("copying everything from " + config_.url + " (" + std::string(why) + ")");
    resync_ = true;
    seen_.clear();
    cursor_ = "0";
    status_.position.store(0, std::memory_order_relaxed);
    status_.resyncs.fetch_add(1, std::memory_order_relaxed);
}

result<bool> follower::connect() {
    if (client_) return true;
    auto url = parse_delivery_url(config_.url);
    if (!url) return std::unexpected("--follow: " + url.error().reason);
    if (!peer_) {
        if (auto numeric = net::resolve_numeric(url->host, url->port)) {
            peer_ = *numeric;
        } else {
            now_ = phase::resolving;
            resolving_ = net::resolver::shared().resolve(loop_, url->host, url->port, [this](net::resolve_result res) {
                now_ = phase::waiting;
                if (res) peer_ = *res;
                else retry_later("resolving the primary: " + res.error());
            });
            return false;
        }
    }
    auto made = transports_.make(*url, config_.ca_pem, *peer_);
    if (!made) return std::unexpected(std::move(made.error()));
    transport_ = std::move(*made);
    client_ = std::make_unique<net::client_connection>(*transport_, static_cast<net::client_events&>(*this), page_limits());
    return true;
}

void follower::send(std::int64_t now_ns) {
    PERCORE_REQUIRES(now_ == phase::waiting && outstanding_ == 0);
    const result<bool> connected = connect();
    if (!connected) retry_later(connected.error().reason);
    if (!connected || !*connected) return;
    target_.assign("/_changes/_all?feed=longpoll&since=");
    target_.append(cursor_);  // a cursor is hex, '.' and '-' (feed_cursor.hpp): nothing to escape
    // Until an exchange succeeded, ask without waiting: a follower counts as connected (for
    // /_health/replica and HAProxy's reads) from its first answer, not after a 20 s long poll of
    // an idle primary.
    target_.append("&timeout=");
    append_uint(target_, status_.connected.load(std::memory_order_relaxed) ? replication_poll_seconds : 0);
    target_.append("&limit=");
    append_uint(target_, max_replication_page_changes);
    auto url = parse_delivery_url(config_.url);
    const std::string host = url ? url->host + ":" + std::to_string(url->port) : std::string();
    const net::header_field fields[] = {{"Authorization", auth_header_},
                                        {"Accept", "application/json"},
                                        {"Percore-Board", config_.board}};  // --cluster only (the sync set)
    net::client_request req;
    req.method = "GET";
    req.target = target_;
    req.host = host;
    req.headers = std::span<const net::header_field>(fields, config_.board.empty() ? 2 : 3);
    now_ = phase::exchanging;
    const std::int64_t seconds = replication_poll_seconds + max_replication_answer_seconds;
    client_->send(req, now_ns + seconds * 1'000'000'000);
}

void follower::on_exchange_done(const net::client_outcome& outcome) {
    if (now_ == phase::stopped) return;
    now_ = phase::waiting;
    if (outcome.error == net::client_error::too_large || outcome.body_bytes > outcome.body.size()) {
        refuse_page(std::string("the answer is larger than a page may be (64 MiB): ") + outcome.text);
        return;
    }
    if (!outcome.ok()) {
        retry_later(std::string("the primary cannot be reached: ") + outcome.text);
        return;
    }
    if (outcome.status == 410) {
        begin_resync("the primary's feed no longer holds our cursor (410)");
        retry_at_ns_ = 0;
        return;
    }
    if (outcome.status != 200) {
        retry_later("the primary answered " + std::to_string(outcome.status) + ": " +
                    std::string(outcome.body.substr(0, 200)));
        return;
    }
    take_page(outcome.body);
}

// A 200 page: checked whole first (page_check.hpp); then its writes go to their owners at once, and
// the page is done when they are all durable.
void follower::take_page(std::string_view body) {
    PERCORE_REQUIRES(now_ == phase::waiting && outstanding_ == 0);
    auto page = read_replication_page(body);
    if (!page) {
        refuse_page(page.error().reason);
        return;
    }
    // SPEC §12: a page of an older epoch than the one this board follows is a demoted primary's
    // (one that does not know it lost): not copied, asked again later, as a failed exchange.
    const std::uint64_t following = server_.role().epoch();
    if (page->epoch < following) {
        retry_later("the primary's epoch " + std::to_string(page->epoch) + " is older than " + std::to_string(following));
        return;
    }
    status_.connected.store(true, std::memory_order_relaxed);
    if (!failing_.empty()) {
        log_line("following " + config_.url + " again");
        failing_.clear();
    }
    backoff_ = min_follow_retry;
    page_cursor_ = std::move(page->last_cursor);
    page_pending_ = page->pending;
    page_changes_ = static_cast<std::uint32_t>(page->changes.size());
    page_received_ms_ = unix_now_ms();
    page_catalog_.clear();
    page_failed_ = false;
    outstanding_ = 0;
    status_.lag_changes.store(page_pending_ + page_changes_, std::memory_order_relaxed);
    if (page_changes_ > 0 && status_.behind_since_ms.load(std::memory_order_relaxed) == 0)
        status_.behind_since_ms.store(page_received_ms_, std::memory_order_relaxed);
    if (capture_ && !capture_page(*page)) return;
    now_ = phase::applying;
    for (page_change& c : page->changes) submit_change(c);
    // the cursor before this page rides in the page's group commit (see Contract: one fdatasync
    // per page, not two)
    cursor_in_page_ = copying_ahead() && stored_cursor_ != cursor_;
    if (cursor_in_page_) submit_cursor(cursor_);
    if (outstanding_ == 0) page_applied();
}

// Past a full copy and a capture, a page's cursor is stored with the next page's writes.
bool follower::copying_ahead() const { return !resync_ && !capture_ && !clear_led_; }

// A change of a checked page (page_check.hpp): its names follow the rules, its value is decoded.
void follower::submit_change(page_change& change) {
    PERCORE_REQUIRES(now_ == phase::applying);
    std::string store_key = change.app;
    store_key.push_back('\0');
    store_key.append(change.key);
    if (store_key.starts_with(follower_records)) return;  // never copied (replication_page.hpp)
    if (resync_) seen_.insert(store_key);
    store::write_op op;
    if (change.deleted) {
        op.kind = store::write_kind::erase;
        op.key = store_key;
    } else {
        op.kind = store::write_kind::put;
        op.doc = store::copy_document(store_key, change.content_type, change.value);
        // the primary's ETag, kept (SPEC §10, "Same versions on every board"; shard_store.hpp)
        PERCORE_ASSERT(change.etag_version != 0 && change.etag_version < store::version_limit);  // page_check
        op.copied_version = change.etag_version;
    }
    if (change.app == catalog_namespace) {
        page_catalog_.push_back({std::move(change.key), change.deleted, std::move(change.value)});
    } else if (app_entry* entry = apps_.insert(change.app)) {
        if (!auth_on_) entry->promote(app_state::absent, app_state::implicit);
        op.gate = gate_of(entry);
        op.turn_class = entry->index();
    }
    op.tag = next_tag();
    ++outstanding_;
    stores_.submit(stores_.owner_of(store_key), std::move(op));
}

std::uint64_t follower::next_tag() {
    return write_ticket::background(stores_.self(), issuer::follower, ++sequence_).encode();
}

store::write_gate* follower::gate_of(app_entry* app) {
    auto& gate = gates_[app];
    if (!gate) gate = std::make_unique<copy_gate>(*app);
    return gate.get();
}

void follower::write_done(const store::write_result& result) {
    PERCORE_REQUIRES(write_ticket::decode(result.tag).from() == issuer::follower);
    PERCORE_REQUIRES(on_shard_thread(stores_.self()));
    PERCORE_ASSERT(outstanding_ > 0);
    --outstanding_;
    using store::write_outcome;
    const bool ok = result.outcome == write_outcome::created || result.outcome == write_outcome::replaced ||
                    result.outcome == write_outcome::deleted || result.outcome == write_outcome::not_found;
    if (!ok) page_failed_ = true;
    if (outstanding_ > 0 || now_ == phase::stopped) return;
    switch (now_) {
    case phase::applying: page_applied(); break;
    case phase::saving: cursor_saved(); break;
    case phase::erasing: erase_more(); break;
    case phase::clearing:
        now_ = phase::waiting;
        if (page_failed_) {
            retry_later("this server refused the erasure of the led-epoch record: it is erased again");
        } else {
            clear_led_ = false;
            log_line("the led-epoch record is erased: copying " + config_.url + " as any follower");
            caught_up();
        }
        break;
    default: break;
    }
}

// Every write of the page is durable (or one was refused: then the page is read again later).
void follower::page_applied() {
    PERCORE_REQUIRES(now_ == phase::applying && outstanding_ == 0);
    if (page_failed_) {
        now_ = phase::waiting;
        retry_later("this server refused a copied write (disk full or failing): the page is copied again");
        return;
    }
    for (const catalog_change& c : page_catalog_) apply_catalog(c);
    status_.applied_changes.fetch_add(page_changes_, std::memory_order_relaxed);
    status_.pages.fetch_add(1, std::memory_order_relaxed);
    if (cursor_in_page_) stored_cursor_ = cursor_;  // cursor_ moves on only below (cursor_saved)
    if (copying_ahead() || (page_changes_ == 0 && page_cursor_ == cursor_)) {
        // the page's writes are durable: the next request, which acknowledges them, goes at once
        // (an empty long poll has nothing to store either)
        cursor_saved();
        return;
    }
    save_cursor();
}

// During a full copy or a capture: the cursor after the page, stored before anything more is asked
// (its resync flag says a restart starts the copy over).
void follower::save_cursor() {
    PERCORE_REQUIRES(outstanding_ == 0 && (now_ == phase::applying || now_ == phase::erasing));
    now_ = phase::saving;
    page_failed_ = false;
    submit_cursor(page_cursor_);
}

void follower::submit_cursor(std::string_view cursor) {
    std::string value = "{\"primary\":";
    append_json_string(value, config_.url);
    value.append(",\"cursor\":");
    append_json_string(value, cursor);
    value.append(resync_ ? ",\"resync\":true}" : ",\"resync\":false}");
    store::write_op op;
    op.kind = store::write_kind::put;
    op.doc = store::copy_document(cursor_key, "application/json", value);
    op.tag = next_tag();
    ++outstanding_;
    stores_.submit(stores_.owner_of(cursor_key), std::move(op));
}

void follower::cursor_saved() {
    PERCORE_REQUIRES(outstanding_ == 0 && (now_ == phase::applying || now_ == phase::saving));
    if (page_failed_) {
        now_ = phase::waiting;
        retry_later("this server refused the cursor's write: the page is copied again");
        return;
    }
    if (now_ == phase::saving) stored_cursor_ = page_cursor_;
    cursor_ = page_cursor_;
    if (!resync_) status_.position.store(cursor_position(cursor_), std::memory_order_relaxed);
    now_ = phase::waiting;
    retry_at_ns_ = 0;
    status_.lag_changes.store(page_pending_, std::memory_order_relaxed);
    if (page_pending_ > 0) return;
    if (resync_) {
        begin_erasing_extras();
        return;
    }
    if (capture_) finish_capture();
    if (capture_) return;  // the tar could not be written: another full copy, then again
    if (clear_led_) {
        clear_led_epoch();
        return;
    }
    caught_up();
}

void follower::caught_up() {
    status_.lag_changes.store(0, std::memory_order_relaxed);
    status_.behind_since_ms.store(0, std::memory_order_relaxed);
}

// The copy caught up with a full copy: the local keys it was not shown are not on the primary.
void follower::begin_erasing_extras() {
    PERCORE_REQUIRES(resync_ && outstanding_ == 0);
    extras_.clear();
    extras_next_ = 0;
    for (unsigned i = 0; i < stores_.shard_count(); ++i) {
        const store::snapshot* snap = stores_.current(i);
        if (!snap) continue;
        store::snapshot::cursor c;
        for (c.seek(*snap, std::string_view(), false); c.valid(); c.next()) {
            std::string_view key = c.doc().key();
            if (!key.starts_with(follower_records) && !seen_.contains(std::string(key))) extras_.emplace_back(key);
        }
    }
    log_line("full copy done; " + std::to_string(extras_.size()) + " keys the primary does not hold are erased");
    if (capture_ && !capture_extras()) return;
    now_ = phase::erasing;
    page_failed_ = false;
    erase_more();
}

void follower::erase_more() {
    PERCORE_REQUIRES(now_ == phase::erasing);
    if (page_failed_) {
        now_ = phase::waiting;
        retry_later("this server refused an erasure of the full copy: it is made again");
        begin_resync("the last step of the full copy failed");
        return;
    }
    while (extras_next_ < extras_.size() && outstanding_ < max_extra_erasures_in_flight) {
        const std::string& key = extras_[extras_next_++];
        store::write_op op;
        op.kind = store::write_kind::erase;
        op.key = key;
        std::size_t nul = key.find('\0');
        if (nul != std::string::npos && std::string_view(key).substr(0, nul) == catalog_namespace) {
            apply_catalog({key.substr(nul + 1), true, {}});
        } else if (app_entry* app = nul == std::string::npos ? nullptr : apps_.find(std::string_view(key).substr(0, nul))) {
            op.gate = gate_of(app);
            op.turn_class = app->index();
        }
        op.tag = next_tag();
        ++outstanding_;
        stores_.submit(stores_.owner_of(key), std::move(op));
    }
    if (outstanding_ > 0) return;
    // every extra erased: the copy is exact; the cursor is stored as a finished one
    resync_ = false;
    status_.position.store(cursor_position(cursor_), std::memory_order_relaxed);
    seen_.clear();
    extras_.clear();
    page_changes_ = 0;
    save_cursor();
}

// --- a returning primary (SPEC §12; diverged_capture.hpp) ------------------------------------------

bool follower::start_capture(std::uint64_t led) {
    PERCORE_REQUIRES(led != 0 && !capture_ && now_ == phase::start);
    auto archive = store::diverged_archive::open(config_.data_root, led);
    if (!archive) {
        // never copy over what only this board holds without keeping it: the copy stops instead
        now_ = phase::refused;
        log_line("cannot keep what this board held as primary of epoch " + std::to_string(led) + " (" +
                 archive.error() + "): copying stops until this server restarts; it serves what it holds");
        return false;
    }
    capture_.emplace(std::move(*archive));
    return true;
}

// Before a page's writes: the local documents they change are kept, and synced (the page is read
// again when that fails: nothing of it was submitted).
bool follower::capture_page(const checked_page& page) {
    PERCORE_REQUIRES(capture_ && resync_ && now_ == phase::waiting && outstanding_ == 0);
    const std::uint64_t before = capture_->documents();
    std::string store_key;
    for (const page_change& c : page.changes) {
        store_key.assign(c.app).push_back('\0');
        store_key.append(c.key);
        if (store_key.starts_with(follower_records) || seen_.contains(store_key)) continue;
        auto kept = capture_->before_change(stores_, store_key, c.deleted, c.content_type, c.value, c.etag_version);
        if (!kept) {
            retry_later("cannot keep a diverged document: " + kept.error().reason);
            return false;
        }
    }
    if (capture_->documents() == before) return true;
    if (auto r = capture_->sync(); !r) {
        retry_later("cannot keep a diverged document: " + r.error().reason);
        return false;
    }
    return true;
}

// Before the resync's last step: the local keys the primary did not show are kept.
bool follower::capture_extras() {
    PERCORE_REQUIRES(capture_ && resync_ && outstanding_ == 0);
    result<void> r;
    for (std::size_t i = 0; r && i < extras_.size(); ++i) r = capture_->before_erase(stores_, extras_[i]);
    if (r) r = capture_->sync();
    if (r) return true;
    now_ = phase::waiting;
    retry_later("cannot keep a diverged document: " + r.error().reason);
    begin_resync("keeping what the primary does not hold failed");
    return false;
}

// The copy is exact: the tar is written (none when nothing differed), and the record goes next.
void follower::finish_capture() {
    PERCORE_REQUIRES(capture_ && !resync_ && outstanding_ == 0);
    const std::uint64_t epoch = capture_->epoch();
    const std::uint64_t kept = capture_->documents();
    auto tar = capture_->finish();
    if (!tar) {
        retry_later("cannot write the diverged tar: " + tar.error().reason);
        begin_resync("the diverged tar is written after another full copy");
        return;
    }
    capture_.reset();
    clear_led_ = true;
    if (tar->empty()) {
        log_line("nothing this board held as primary of epoch " + std::to_string(epoch) + " differs from " + config_.url);
        return;
    }
    status_.diverged_documents.fetch_add(kept, std::memory_order_relaxed);
    status_.diverged_files.fetch_add(1, std::memory_order_relaxed);
    log_line("diverged: " + std::to_string(kept) + " documents this board held as primary of epoch " +
             std::to_string(epoch) + " differ from " + config_.url + "; kept in " + *tar +
             " (percore restore TAR DIR opens them)");
}

void follower::clear_led_epoch() {
    PERCORE_REQUIRES(clear_led_ && outstanding_ == 0 && !capture_);
    store::write_op op;
    op.kind = store::write_kind::erase;
    op.key = led_epoch_key;
    op.tag = next_tag();
    ++outstanding_;
    now_ = phase::clearing;
    page_failed_ = false;
    stores_.submit(stores_.owner_of(led_epoch_key), std::move(op));
}

// The registry follows the catalog as apps_admin makes it follow on the primary (apps_admin.hpp).
void follower::apply_catalog(const catalog_change& c) {
    std::string_view rest = c.rest;
    if (rest.starts_with("app/")) {
        std::string_view name = rest.substr(4);
        app_entry* app = c.deleted ? apps_.find(name) : apps_.insert(name);
        if (!app) return;
        if (c.deleted) {
            app->set_state(app_state::absent);
            return;
        }
        if (auto quota = decode_app_record(c.value)) app->set_quota(*quota);
        app->set_state(app_state::created);
    } else if (rest.starts_with("deleted/")) {
        std::string_view name = rest.substr(8);
        app_entry* app = c.deleted ? apps_.find(name) : apps_.insert(name);
        if (!app) return;
        if (!c.deleted) {
            app->set_state(app_state::deleting);
            apps_.token_revoked();  // as on the primary: the app's verified tokens are checked again
        } else if (app->state() == app_state::deleting) {
            app->reset_usage();
            app->set_state(app_state::absent);
        }
    } else if (rest.starts_with("token/")) {
        if (c.deleted) apps_.forget_token(rest.substr(6));
        apps_.token_revoked();  // a cached check of a changed or revoked token is made again
    }
}

// A page that breaks the rules (page_check.hpp), or an answer too large to be one: nothing of it was
// submitted. The copy stops here, with one log line, until the server restarts; reads go on from
// what it holds (docs/decisions.md, "The follower trusts no page").
void follower::refuse_page(std::string_view why) {
    PERCORE_REQUIRES(now_ == phase::waiting && outstanding_ == 0);
    now_ = phase::refused;
    status_.rejected_pages.fetch_add(1, std::memory_order_relaxed);
    status_.connected.store(false, std::memory_order_relaxed);
    if (status_.behind_since_ms.load(std::memory_order_relaxed) == 0)
        status_.behind_since_ms.store(unix_now_ms(), std::memory_order_relaxed);
    log_line("refused a page of " + config_.url + " (" + std::string(why) +
             "): copying stops until this server restarts; it serves what it holds");
}

void follower::retry_later(std::string_view why) {
    PERCORE_ASSERT(backoff_ >= min_follow_retry && backoff_ <= max_follow_retry);
    status_.connected.store(false, std::memory_order_relaxed);
    status_.failed_exchanges.fetch_add(1, std::memory_order_relaxed);
    if (status_.behind_since_ms.load(std::memory_order_relaxed) == 0)
        status_.behind_since_ms.store(unix_now_ms(), std::memory_order_relaxed);
    if (failing_ != why) {
        log_line(std::string(why) + "; trying again");
        failing_.assign(why);
    }
    // the connection stays: a failed exchange closed it, and the next send() opens a new one (it
    // must not be destroyed from within its own callback: client_connection.hpp)
    if (now_ != phase::resolving) now_ = phase::waiting;
    const auto now = loop_.clock().now().time_since_epoch();
    retry_at_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(now + backoff_).count();
    backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(max_follow_retry));
}

}  // namespace percore::shards
