// connection_pool: every HTTP connection of one shard — the slots they live in (reused, so the
// steady state of keep-alive requests allocates nothing), the answer tickets that name them, the
// body budget they share, their deadlines, and the graceful stop.
//
// Contract
// - One pool per shard, used only on that shard's thread, inside rounds. It knows no sockets:
//   a listener (net/listener.hpp) or a test opens connections over transports.
// - open() gives a transport to a free connection; nullptr when max_connections are open or the
//   pool is stopping (the caller refuses the client).
// - complete(ticket, answer): the answer of a request the handler left pending; a ticket whose
//   connection is gone (or reused: the generation differs) is ignored. A pending connection has no
//   deadline (a long poll may wait minutes): only its answer, a failed write or shutdown ends it.
// - Streams, instead of complete() (a change feed: SPEC §8), on the shard's thread:
//   stream_begin(ticket, status, content_type) sends the head — Content-Type, Cache-Control:
//   no-store and Transfer-Encoding: chunked (HTTP/1.0 clients: no chunked coding, Connection: close);
//   stream_write(ticket, bytes) sends `bytes` (copied) as one chunk, nothing when empty;
//   stream_end(ticket) sends the last chunk and the connection goes on with its next request
//   (HTTP/1.0: it closes, which ends the body). Stale tickets are ignored (stream_status::gone);
//   so are calls in the wrong order (stream_write on a pending ticket, stream_begin on a streaming
//   one). A write that would leave more than limits.max_stream_unsent_bytes unsent closes the
//   connection, tells closed() and returns cut_off. A stream whose every byte was sent has no
//   idle deadline (its handler's heartbeats say when it is alive; a gone peer shows at the next
//   write); one that leaves bytes unsent for an idle timeout (the client reads nothing) closes. begin_shutdown() ends every
//   stream (last chunk, then close), and a stream begun after it ends at once (gone); closed() is
//   told when each connection closes. closed() may be told from inside stream_begin/stream_write
//   (a cut-off, a failed write), before the call returns: the handler must allow that reentry.
//   A HEAD request's stream sends its head only. The request's body budget is given back at
//   stream_begin (a stream may last hours). A producer that must not be cut off (a backup) writes
//   only within stream_room(), and writes again in a later round once the client has read;
//   stream_abort() ends a stream without its last chunk, so the client sees a body that did not end.
// - Time: the round clock it was given; sweep() (every tick) acts on passed deadlines.
// - Body budget: bytes of request bodies held in memory by all of the pool's connections, at
//   most limits.body_budget_bytes, and those of one non-default turn class (the class admit() gave
//   the request) at most class_body_share_bytes(limits); a body that would pass either is answered
//   503 with Retry-After.
// - The handler's closed() is told once for every connection it was handed a request on, when the
//   connection ends — close_all() and the pool's destruction included (the handler must outlive
//   the pool).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "net/answer_sink.hpp"
#include "net/connection.hpp"
#include "net/connection_shared.hpp"
#include "net/connection_stats.hpp"
#include "net/limits.hpp"
#include "net/request_handler.hpp"
#include "net/response.hpp"
#include "shards/runtime/round_clock.hpp"

namespace percore::net {

class connection_pool final : public answer_sink {
public:
    connection_pool(const runtime::round_clock& clock, request_handler& handler, connection_limits limits);
    ~connection_pool();
    connection_pool(const connection_pool&) = delete;
    connection_pool& operator=(const connection_pool&) = delete;

    [[nodiscard]] connection* open(transport& io);
    bool full() const { return shared_.open_connections() >= shared_.limits().max_connections || shared_.shutting_down(); }

    // answer_sink
    void complete(answer_ticket ticket, const simple_answer& answer) override;
    [[nodiscard]] stream_status stream_begin(answer_ticket ticket, int status, std::string_view content_type,
                                             std::string_view extra_name = {},
                                             std::string_view extra_value = {}) override;
    [[nodiscard]] stream_status stream_write(answer_ticket ticket, std::string_view bytes) override;
    void stream_end(answer_ticket ticket) override;
    // Ends a stream without its last chunk: the connection closes at once, its unsent bytes dropped
    // (closed() is told before this returns).
    void stream_abort(answer_ticket ticket) override;
    // connection::stream_room() of the stream `ticket` names; 0 for a stale ticket.
    std::size_t stream_room(answer_ticket ticket) const override;
    void sweep();
    void begin_shutdown();
    void close_all();

    // The Date line answers carry; refreshed by the owner about once a second.
    void set_date(std::int64_t unix_seconds) { shared_.set_date(unix_seconds); }

    std::size_t open_connections() const { return shared_.open_connections(); }
    connection_stats& stats() { return shared_.stats(); }
    const connection_stats& stats() const { return shared_.stats(); }
    const connection_limits& limits() const { return shared_.limits(); }
    // Body bytes the connections of non-default `turn_class` hold now.
    std::uint64_t class_body_bytes(std::uint32_t turn_class) const { return shared_.class_body_bytes(turn_class); }
    bool shutting_down() const { return shared_.shutting_down(); }

private:
    // The connection `ticket` names if it is still that request's and in `state`, else null.
    connection* find(answer_ticket ticket, connection_state state);
    const connection* find(answer_ticket ticket, connection_state state) const;

    connection_shared shared_;
    std::vector<std::unique_ptr<connection>> connections_;
};

}  // namespace percore::net
