// log_line: one event, one line on stderr — "percore: " + text + "\n" in a single write(2), so the
// lines of several shards never interleave (SPEC §1: logs go to stderr, one line per event).
//
// Contract: any thread; never allocates more than the line; never fails (a lost log line is not
// an error of the request that caused it). No caller passes a secret: tokens, signing secrets and
// seal keys appear in no line (SPEC §7).
#pragma once

#include <string_view>

namespace percore::shards {

void log_line(std::string_view text);

}  // namespace percore::shards
