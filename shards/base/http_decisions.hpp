// http_decisions: every HTTP decision about documents in one place — what a request's
// preconditions mean (parsed strictly, evaluated by the store's one evaluator for reads and writes
// alike), and which status, ETag and error text each outcome is answered with.
//
// Any thread; allocation only for the versions a precondition lists.
#pragma once

#include <expected>

#include "net/request_handler.hpp"
#include "net/request_parser.hpp"
#include "store/document.hpp"
#include "store/precondition.hpp"
#include "store/shard_store.hpp"

namespace percore::shards {

// If-Match / If-None-Match as versions; an error (400, with this reason) for a malformed field.
std::expected<store::precondition, const char*> preconditions_of(const net::request_head& head);

// A read's precondition against the document it found (null: none): 0 to answer with the document
// (or 404), 304 (If-None-Match matched), or 412 (If-Match failed).
int read_precondition_status(const store::precondition& pre, const store::document* doc);

// A write's answer.
net::simple_answer write_answer(store::write_outcome outcome, std::uint64_t version, bool current_exists);

}  // namespace percore::shards
