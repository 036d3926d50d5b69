// documents_endpoint: the documents (SPEC §2, §4, §5; base/endpoint.hpp) — GET, HEAD, PUT, DELETE
// and OPTIONS of /{app}/{key}, and GET or HEAD of an app's list pages, /{app}/?prefix&after&limit.
//
// Contract
// - One per shard, owned by that shard's document service, on that shard's thread inside a round.
// - Reads never hop: GET, HEAD and list pages are answered from the owners' current snapshots (any
//   shard's), with If-Match and If-None-Match (304, 412: http_decisions.hpp) and a GET's Range and
//   If-Range (206, 416). A token with a key prefix lists only within it (reachable_prefix,
//   access.hpp).
// - Writes (PUT, DELETE) go to the owner's store through store_client::submit(), tagged
//   write_ticket{this shard, ticket} and carrying their app as write_gate and turn class, and
//   handle() returns pending; write_done() turns the write's result into its answer
//   (write_answer; 507 when the owner's gate refused a quota). A chunked PUT's body, whose size
//   admission could not know, is checked against max_document_bytes here (413).
// - Large values are sent by reference to the snapshot's document (zero_copy_min_bytes and more)
//   or, when only in the log, from its segment with sendfile; either is kept alive by a reference
//   until sent. Smaller ones are copied into the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/request_handler.hpp"
#include "net/route.hpp"
#include "shards/apps/admission.hpp"
#include "shards/base/endpoint.hpp"
#include "shards/base/store_client.hpp"
#include "store/snapshot.hpp"

namespace percore::shards {

// Values at least this large are sent by reference (retained document) instead of copied: a copy
// of 16 KiB costs about what the reference's atomic retain and release do.
inline constexpr std::size_t zero_copy_min_bytes = 16 * 1024;

// The methods a document allows (its OPTIONS' and 405's Allow).
inline constexpr std::string_view document_methods = "GET, HEAD, PUT, DELETE, OPTIONS";

// The answer to OPTIONS (RFC 9110 §9.3.7, SPEC §4): 204 with Allow, no body.
void allow_answer(net::response& res, std::string_view allow);

class documents_endpoint final : public endpoint {
public:
    // admission: the apps' bindings, whose app a write counts against (not owned).
    documents_endpoint(store_client& stores, const admission_control& admission);

    // REQUIRES: on this shard's thread; r.kind is document or list.
    result handle(net::request& req, net::response& res, const net::route& r, const principal& who,
                  net::answer_ticket ticket) override;
    bool submits_writes() const override { return true; }
    // REQUIRES: on this shard's thread; the write is a document write this endpoint submitted.
    std::optional<net::simple_answer> write_done(const store::write_result& result) override;

private:
    result read_document(const net::request& req, net::response& res, const net::route& r);
    void send_document(net::response& res, const net::request_head& head, const store::snapshot& snap,
                       const store::document& doc);
    void send_value(net::response& res, const store::snapshot& snap, const store::document& doc,
                    std::uint64_t offset, std::uint64_t size);
    result write_document(net::request& req, net::response& res, const net::route& r, net::answer_ticket ticket);
    void put_document(store::write_op& op, net::request& req, unsigned owner);
    void list_page(net::response& res, const net::route& r, const principal& who);
    void list_documents(net::response& res, const net::route& r, std::string_view prefix);
    void seek_cursors(std::string_view key, bool exclusive);
    int smallest_cursor(std::string_view prefix_key);
    void append_listed(const store::document& doc, std::string_view key, bool first);
    void build_key(std::string_view app, std::string_view key);

    store_client& stores_;
    const admission_control& admission_;
    const unsigned self_;
    std::string key_;                               // app '\0' key, reused
    std::string after_;                             // a list's app '\0' after, reused
    std::string text_;                              // list bodies, reused
    std::vector<store::snapshot::cursor> cursors_;  // one per shard, for list pages
};

}  // namespace percore::shards
