// answer_sink: where an answer the handler left pending goes — the whole answer at once
// (complete), or a stream of chunks (a change feed, a backup). Implemented by connection_pool; the
// capabilities that answer later (feeds, backups, writes) hold this, not the pool.
//
// Contract: the owning shard's thread, inside a round. Stale tickets are ignored (stream_status::
// gone); the calls' rules are connection_pool's (net/connection_pool.hpp, "Streams").
#pragma once

#include <cstddef>
#include <string_view>

#include "net/request_handler.hpp"

namespace percore::net {

class answer_sink {
public:
    virtual void complete(answer_ticket ticket, const simple_answer& answer) = 0;
    virtual stream_status stream_begin(answer_ticket ticket, int status, std::string_view content_type,
                                       std::string_view extra_name = {}, std::string_view extra_value = {}) = 0;
    virtual stream_status stream_write(answer_ticket ticket, std::string_view bytes) = 0;
    // How much stream_write may send now without the stream being cut off; 0 for a stale ticket.
    virtual std::size_t stream_room(answer_ticket ticket) const = 0;
    virtual void stream_end(answer_ticket ticket) = 0;
    // Ends a stream without its last chunk (the client sees a body that did not end).
    virtual void stream_abort(answer_ticket ticket) = 0;

protected:
    ~answer_sink() = default;
};

}  // namespace percore::net
