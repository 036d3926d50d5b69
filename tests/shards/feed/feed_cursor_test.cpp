// The change feed's cursor text (shards/feed/feed_cursor.hpp): what percore makes it reads back, and
// anything else is told apart.
#include <doctest.h>

#include <string>

#include "shards/feed/feed_cursor.hpp"

using namespace percore::shards;

TEST_CASE("a cursor reads back as the directory, generation and versions it was made of") {
    feed_cursor c{0x0123456789abcdefull, 3, {0, 1, 0xffffffffffffffffull}};
    std::string text = cursor_text(c);
    auto back = parse_cursor(text);
    REQUIRE(back.has_value());
    CHECK(back->directory_id == c.directory_id);
    CHECK(back->generation == 3);
    CHECK(back->versions == c.versions);
}

TEST_CASE("a cursor's text needs no escaping in a query, a JSON string or an event id") {
    std::string text = cursor_text({42, 1, {7, 8, 9}});
    for (char ch : text) CHECK(((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || ch == '-' || ch == '.'));
}

TEST_CASE("a cursor with any character changed is not a cursor") {
    std::string text = cursor_text({0xabc, 2, {10, 20, 30}});
    for (std::size_t i = 0; i < text.size(); ++i) {
        std::string bad = text;
        bad[i] = bad[i] == '1' ? '2' : '1';
        CHECK_FALSE_MESSAGE(parse_cursor(bad).has_value(), bad);
    }
}

TEST_CASE("text percore never makes is not a cursor") {
    for (const char* t : {"", "0", "now", "abc", "1-1-1", "1-1--0", "01-1-1-0", "1-1-1-1-1", "x-y-z-w"})
        CHECK_FALSE_MESSAGE(parse_cursor(t).has_value(), t);
    CHECK_FALSE(parse_cursor(std::string(5000, 'a')).has_value());
    std::string cut = cursor_text({1, 1, {5, 6}});
    CHECK_FALSE(parse_cursor(cut.substr(0, cut.size() - 1)).has_value());
}
