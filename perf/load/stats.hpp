// stats: what one worker counted during one phase; merged by main for the report.
//
// Contract
// - Plain counters plus a latency histogram; no allocation while counting (first_wrong is filled
//   once, on the first wrong answer, to help diagnose it).
// - Every request that was sent ends as exactly one of: answered (expected or wrong), or
//   unanswered (the connection broke or the run ended before its answer). With --rate, requests
//   whose intended send time came before the end but that were never sent (the server kept the
//   connection's pipeline full) are counted in due_unsent: latency cannot cover them, this does.
#pragma once

#include "histogram.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace percore::load {

struct stats {
    std::uint64_t sent = 0;
    std::uint64_t answered = 0;
    std::array<std::uint64_t, 6> status_class{};   // [1]=1xx ... [5]=5xx; [0] unused
    std::uint64_t wrong = 0;                       // unexpected status, bad framing or length
    std::uint64_t precondition_failed = 0;         // 412 to an If-Match PUT (expected, not wrong)
    std::uint64_t connect_errors = 0;
    std::uint64_t io_errors = 0;                   // connections broken with requests in flight
    std::uint64_t unanswered = 0;
    std::uint64_t due_unsent = 0;                  // --rate: due before the end, never sent
    std::uint64_t connects = 0;
    histogram latency;
    std::string first_wrong;

    void note_wrong(const char* why, int status) {
        ++wrong;
        if (first_wrong.empty()) first_wrong = std::string(why) + " (status " + std::to_string(status) + ")";
    }

    void merge(const stats& o) {
        sent += o.sent;
        answered += o.answered;
        for (std::size_t i = 0; i < status_class.size(); ++i) status_class[i] += o.status_class[i];
        wrong += o.wrong;
        precondition_failed += o.precondition_failed;
        connect_errors += o.connect_errors;
        io_errors += o.io_errors;
        unanswered += o.unanswered;
        due_unsent += o.due_unsent;
        connects += o.connects;
        latency.merge(o.latency);
        if (first_wrong.empty()) first_wrong = o.first_wrong;
    }
};

}  // namespace percore::load
