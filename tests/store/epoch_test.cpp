#include <doctest.h>

#include "store/epoch.hpp"

using percore::store::reader_epochs;

TEST_CASE("a stamp taken while every reader is quiescent has passed at once") {
    reader_epochs epochs(3);
    CHECK(epochs.readers() == 3);
    reader_epochs::stamp_type s;
    epochs.stamp(s);
    CHECK(s.epochs.size() == 3);
    CHECK(epochs.passed(s));
}

TEST_CASE("a stamp has not passed while a reader stays in the round it was in") {
    reader_epochs epochs(2);
    epochs.begin_round(1);
    reader_epochs::stamp_type s;
    epochs.stamp(s);
    CHECK_FALSE(epochs.passed(s));
    epochs.begin_round(0);
    epochs.quiesce(0);
    CHECK_FALSE(epochs.passed(s));
}

TEST_CASE("a reader passes a stamp by quiescing") {
    reader_epochs epochs(1);
    epochs.begin_round(0);
    reader_epochs::stamp_type s;
    epochs.stamp(s);
    epochs.quiesce(0);
    CHECK(epochs.passed(s));
}

TEST_CASE("a reader passes a stamp by beginning a new round") {
    reader_epochs epochs(1);
    epochs.begin_round(0);
    reader_epochs::stamp_type s;
    epochs.stamp(s);
    epochs.begin_round(0);
    CHECK(epochs.passed(s));
}

TEST_CASE("a round that began after the stamp does not hold it back") {
    reader_epochs epochs(1);
    reader_epochs::stamp_type s;
    epochs.stamp(s);
    epochs.begin_round(0);
    CHECK(epochs.passed(s));
}

TEST_CASE("quiescing twice is the same as quiescing once") {
    reader_epochs epochs(1);
    epochs.begin_round(0);
    epochs.quiesce(0);
    epochs.quiesce(0);
    reader_epochs::stamp_type s;
    epochs.stamp(s);
    CHECK(s.epochs[0] % 2 == 1);
    epochs.begin_round(0);
    reader_epochs::stamp_type inside;
    epochs.stamp(inside);
    CHECK(inside.epochs[0] % 2 == 0);
}
