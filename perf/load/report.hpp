// report: the results of a run as human text and as JSON.
//
// Contract
// - Both renderings come from the same `run_result`; the JSON object has the keys written by
//   write_json() (the options, among them "path" (null when unset), "style" and "headers": the
//   names of the --header fields, never their values, which may be tokens; counts,
//   latency_us percentiles and buckets, cpu); the text is for people, its first line the options.
// - Writing is the only thing that allocates here; it happens after the run.
#pragma once

#include "options.hpp"
#include "stats.hpp"

#include <ostream>

namespace percore::load {

struct run_result {
    stats totals;
    double duration_s = 0;       // the measured interval
    double cpu_user_s = 0;       // getrusage over the measured run (this process)
    double cpu_system_s = 0;
};

void write_text(std::ostream& out, const options& o, const run_result& r);
void write_json(std::ostream& out, const options& o, const run_result& r);

}  // namespace percore::load
