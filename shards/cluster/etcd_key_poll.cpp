#include "shards/cluster/etcd_key_poll.hpp"

#include <utility>

#include "shards/cluster/limits.hpp"
#include "shards/runtime/check.hpp"

namespace percore::shards {

namespace {

bool same_key_state(const std::optional<etcd_kv>& a, const std::optional<etcd_kv>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a || (a->create_revision == b->create_revision && a->mod_revision == b->mod_revision);
}

}  // namespace

etcd_key_poll::etcd_key_poll(etcd_client& client, std::string key, std::chrono::milliseconds interval, changed on_change)
    : client_(client), key_(std::move(key)), interval_(interval), on_change_(std::move(on_change)) {
    PERCORE_REQUIRES(!key_.empty() && key_.size() <= max_etcd_key_bytes);
    PERCORE_REQUIRES(interval_.count() > 0 && on_change_);
}

void etcd_key_poll::tick() {
    const etcd_client::time_point now = client_.now();
    if (client_.busy() || now < next_) return;
    next_ = now + interval_;
    ++polls_;
    client_.range(key_, next_, [this](result<range_answer> answer) { answered(std::move(answer)); });
}

etcd_client::time_point etcd_key_poll::wake_by() const {
    return client_.busy() ? client_.wake_by() : next_;
}

void etcd_key_poll::answered(result<range_answer> answer) {
    if (!answer) {
        ++failed_polls_;
        return;
    }
    // a range of one key holds that key or nothing: anything else is an answer not taken
    const bool one_key = answer->kvs.empty() || (answer->kvs.size() == 1 && answer->kvs.front().key == key_);
    if (!one_key) {
        ++failed_polls_;
        return;
    }
    if (answer->header.revision < seen_revision_) return;   // an endpoint behind what was seen
    seen_revision_ = answer->header.revision;
    std::optional<etcd_kv> now;
    if (!answer->kvs.empty()) now = std::move(answer->kvs.front());
    if (known_ && same_key_state(current_, now)) return;
    known_ = true;
    current_ = std::move(now);
    on_change_(current_);
}

}  // namespace percore::shards
