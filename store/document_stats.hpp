// document_stats: process-wide document accounting, for tests and metrics.
#pragma once

#include <cstdint>

namespace percore::store {

// Documents made by make_document() and not yet freed, across all threads: a sum of per-thread
// counts (no line shared by the writers), so exact once the threads that made and freed them are
// done, and possibly off by the counts in flight while they run.
std::int64_t live_documents();

}  // namespace percore::store
