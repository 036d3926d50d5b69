// document_stats: process-wide document accounting, for tests and metrics.
#pragma once

#include <cstdint>

namespace percore::store {

// Documents made by make_document() and not yet freed, across all threads.
std::int64_t live_documents();

}  // namespace percore::store
