#include "shards/apps/app_registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

constexpr std::size_t table_slots = max_apps * 2;
static_assert((table_slots & (table_slots - 1)) == 0, "the probe masks with table_slots - 1");

std::uint64_t name_hash(std::string_view name) {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
    for (char c : name) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

// Zeroed pointer arrays from calloc: the kernel's zero pages, resident only once written.
app_entry** zeroed_slots(std::size_t n) {
    void* p = std::calloc(n, sizeof(app_entry*));
    if (!p) throw std::bad_alloc();
    return static_cast<app_entry**>(p);
}

std::atomic_ref<app_entry*> slot_ref(app_entry** table, std::size_t i) { return std::atomic_ref<app_entry*>(table[i]); }

}  // namespace

app_entry::app_entry(std::string_view name, std::uint32_t index, unsigned shards)
    : index_(index), shards_(shards), counters_(std::make_unique<app_counters[]>(shards + 1)) {
    PERCORE_REQUIRES(!name.empty() && name.size() <= name_.size() && shards >= 1);
    std::memcpy(name_.data(), name.data(), name.size());
    name_size_ = static_cast<std::uint8_t>(name.size());
}

app_quota app_entry::quota() const {
    app_quota q;
    q.documents = quota_documents_.load(std::memory_order_acquire);
    q.bytes = quota_bytes_.load(std::memory_order_acquire);
    q.max_document_bytes = quota_max_document_bytes_.load(std::memory_order_acquire);
    q.requests_per_second = quota_requests_per_second_.load(std::memory_order_acquire);
    q.connections = quota_connections_.load(std::memory_order_acquire);
    return q;
}

void app_entry::set_quota(const app_quota& q) {
    quota_documents_.store(q.documents, std::memory_order_release);
    quota_bytes_.store(q.bytes, std::memory_order_release);
    quota_max_document_bytes_.store(q.max_document_bytes, std::memory_order_release);
    quota_requests_per_second_.store(q.requests_per_second, std::memory_order_release);
    quota_connections_.store(q.connections, std::memory_order_release);
}

std::int64_t app_entry::usage_sum(std::atomic<std::int64_t> app_counters::*field) const {
    std::int64_t sum = 0;
    for (unsigned s = 0; s <= shards_; ++s) sum += (counters_[s].*field).load(std::memory_order_acquire);
    return sum;
}

app_counters& app_entry::own_usage() {
    unsigned shard = runtime::this_shard();
    return counters_[shard < shards_ ? shard : shards_];
}

// An atomic add, not a load and store: the line of threads that are no shard has several writers,
// and reset_usage() may store zero from another thread. On a line no other thread writes, the
// locked add costs no cache-line transfer.
void app_entry::count_usage(std::int64_t documents, std::int64_t bytes) {
    app_counters& mine = own_usage();
    if (documents != 0) mine.documents.fetch_add(documents, std::memory_order_acq_rel);
    if (bytes != 0) mine.bytes.fetch_add(bytes, std::memory_order_acq_rel);
}

void app_entry::add_recovered(std::int64_t documents, std::int64_t bytes) { count_usage(documents, bytes); }

void app_entry::reset_usage() {
    for (unsigned s = 0; s <= shards_; ++s) {
        counters_[s].documents.store(0, std::memory_order_release);
        counters_[s].bytes.store(0, std::memory_order_release);
    }
    tokens_.store(0, std::memory_order_release);
    deliveries_.store(0, std::memory_order_release);
}

bool app_entry::reserve(app_object kind, std::uint64_t cap) {
    std::atomic<std::uint64_t>& held = objects(kind);
    std::uint64_t now = held.load(std::memory_order_acquire);
    do {
        if (now >= cap) return false;
    } while (!held.compare_exchange_weak(now, now + 1, std::memory_order_acq_rel, std::memory_order_acquire));
    return true;
}

void app_entry::release(app_object kind) {
    std::atomic<std::uint64_t>& held = objects(kind);
    std::uint64_t now = held.load(std::memory_order_acquire);
    do {
        if (now == 0) return;  // reset by an erasure meanwhile: nothing to give back
    } while (!held.compare_exchange_weak(now, now - 1, std::memory_order_acq_rel, std::memory_order_acquire));
}

quota_verdict app_entry::would_pass(std::int64_t documents, std::int64_t bytes) const {
    std::uint64_t qd = quota_documents_.load(std::memory_order_acquire);
    std::uint64_t qb = quota_bytes_.load(std::memory_order_acquire);
    if (documents > 0 && qd != unlimited && static_cast<std::uint64_t>(this->documents() + documents) > qd)
        return quota_verdict::documents;
    if (bytes > 0 && qb != unlimited && static_cast<std::uint64_t>(this->bytes() + bytes) > qb) return quota_verdict::bytes;
    return quota_verdict::ok;
}

// A write that grows no usage with a quota counts on the shard's own line and nothing else; one
// that does checks the sum and counts under the usage mutex, which every such write takes.
std::uint8_t app_entry::try_apply(std::int64_t documents, std::int64_t bytes) {
    const bool checked = (documents > 0 && quota_documents_.load(std::memory_order_acquire) != unlimited) ||
                         (bytes > 0 && quota_bytes_.load(std::memory_order_acquire) != unlimited);
    if (!checked) {
        count_usage(documents, bytes);
        return static_cast<std::uint8_t>(quota_verdict::ok);
    }
    std::unique_lock lock(usage_mutex_);
    const quota_verdict refused = would_pass(documents, bytes);
    if (refused == quota_verdict::ok) count_usage(documents, bytes);
    lock.unlock();
    if (refused != quota_verdict::ok) {
        // counted on the applying shard's own line (one writer)
        unsigned shard = runtime::this_shard();
        if (shard < shards_) {
            auto& c = counters_[shard].refused_quota;
            c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
    }
    return static_cast<std::uint8_t>(refused);
}

void app_entry::undo(std::int64_t documents, std::int64_t bytes) { count_usage(-documents, -bytes); }

bool app_entry::take_connection() {
    std::uint64_t limit = quota_connections_.load(std::memory_order_acquire);
    std::uint64_t now = connections_.load(std::memory_order_relaxed);
    for (;;) {
        if (limit != unlimited && now >= limit) return false;
        if (connections_.compare_exchange_weak(now, now + 1, std::memory_order_acq_rel, std::memory_order_relaxed))
            return true;
    }
}

void app_entry::drop_connection() {
    std::uint64_t was = connections_.fetch_sub(1, std::memory_order_acq_rel);
    PERCORE_ASSERT(was > 0);
}

// GCRA (ITU-T I.371): each request moves the theoretical arrival time (TAT) on by one interval
// T = 1 s / rate; a request is admitted while TAT - now stays within the burst tolerance
// (1 s - T: a client idle for a second may send `rate` requests at once, then `rate` per second).
std::uint32_t app_entry::take_request(std::int64_t now_ns) {
    std::uint64_t rate = quota_requests_per_second_.load(std::memory_order_acquire);
    if (rate == unlimited) return 0;
    constexpr std::int64_t second = 1'000'000'000;
    if (rate == 0) return 1;
    const std::int64_t interval = std::max<std::int64_t>(1, second / static_cast<std::int64_t>(std::min<std::uint64_t>(rate, second)));
    const std::int64_t tolerance = second - interval;
    std::int64_t tat = rate_tat_ns_.load(std::memory_order_relaxed);
    for (;;) {
        std::int64_t start = std::max(tat, now_ns);
        if (start - now_ns > tolerance) {
            std::int64_t wait = start - now_ns - tolerance;
            return static_cast<std::uint32_t>(std::max<std::int64_t>(1, (wait + second - 1) / second));
        }
        if (rate_tat_ns_.compare_exchange_weak(tat, start + interval, std::memory_order_acq_rel, std::memory_order_relaxed))
            return 0;
    }
}

app_registry::app_registry(unsigned shards) : shards_(shards) {}

app_registry::~app_registry() {
    std::free(table_.load(std::memory_order_relaxed));
    std::free(by_index_holder_);
}

std::size_t app_registry::slot_of(app_entry** table, std::string_view name) const {
    std::size_t i = name_hash(name) & (table_slots - 1);
    for (;;) {
        app_entry* e = slot_ref(table, i).load(std::memory_order_acquire);
        if (!e || e->name() == name) return i;
        i = (i + 1) & (table_slots - 1);
    }
}

app_entry* app_registry::find(std::string_view name) const {
    app_entry** table = table_.load(std::memory_order_acquire);
    if (!table || name.empty() || name.size() > net::max_app_bytes) return nullptr;
    return slot_ref(table, slot_of(table, name)).load(std::memory_order_acquire);
}

app_entry* app_registry::insert(std::string_view name) {
    PERCORE_REQUIRES(!name.empty() && name.size() <= net::max_app_bytes);
    if (app_entry* e = find(name)) return e;
    std::lock_guard lock(insert_mutex_);
    app_entry** table = table_.load(std::memory_order_relaxed);
    if (!table) {
        by_index_holder_ = zeroed_slots(max_apps);
        table = zeroed_slots(table_slots);
        table_.store(table, std::memory_order_release);
    }
    std::size_t slot = slot_of(table, name);
    if (app_entry* e = slot_ref(table, slot).load(std::memory_order_acquire)) return e;
    std::uint32_t n = count_.load(std::memory_order_relaxed);
    if (n >= max_apps) return nullptr;
    owned_.push_back(std::make_unique<app_entry>(name, n + 1, shards_));
    app_entry* e = owned_.back().get();
    slot_ref(by_index_holder_, n).store(e, std::memory_order_release);
    count_.store(n + 1, std::memory_order_release);
    slot_ref(table, slot).store(e, std::memory_order_release);
    return e;
}

app_entry* app_registry::at(std::uint32_t index) const {
    if (index == 0 || index > count_.load(std::memory_order_acquire)) return nullptr;
    return slot_ref(by_index_holder_, index - 1).load(std::memory_order_acquire);
}

std::vector<app_entry*> app_registry::entries() const {
    std::vector<app_entry*> out;
    std::uint32_t n = count_.load(std::memory_order_acquire);
    out.reserve(n);
    for (std::uint32_t i = 1; i <= n; ++i) out.push_back(at(i));
    return out;
}

std::vector<std::string> app_registry::names() const {
    std::vector<std::string> out;
    for (app_entry* e : entries())
        if (e->exists()) out.emplace_back(e->name());
    std::sort(out.begin(), out.end());
    return out;
}

void app_registry::note_token_use(std::string_view id, std::int64_t unix_seconds) {
    std::lock_guard lock(token_use_mutex_);
    auto [it, fresh] = token_use_.try_emplace(std::string(id), unix_seconds);
    if (!fresh && it->second < unix_seconds) it->second = unix_seconds;
}

std::int64_t app_registry::token_last_used(std::string_view id) const {
    std::lock_guard lock(token_use_mutex_);
    auto it = token_use_.find(std::string(id));
    return it == token_use_.end() ? 0 : it->second;
}

void app_registry::forget_token(std::string_view id) {
    std::lock_guard lock(token_use_mutex_);
    token_use_.erase(std::string(id));
}

}  // namespace percore::shards
