// The main() of every doctest executable. doctest's own main exits 0 when no test case ran (a
// --source-file or --test-case filter that matches nothing, a test file without test cases), so a
// meson test() that selects one source file of a shared executable could pass without testing
// anything. This main fails such a run: a listener counts the test cases that started, and a run
// (not a query such as --count, --list-test-cases or --help) that started none exits 1.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest.h>

#include <cstdio>

namespace {

unsigned test_cases_started = 0;
bool test_run_ended = false;

struct zero_test_cases_guard : doctest::IReporter {
    explicit zero_test_cases_guard(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override { test_run_ended = true; }
    void test_case_start(const doctest::TestCaseData&) override { ++test_cases_started; }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("zero_test_cases_guard", 1, zero_test_cases_guard);

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit() || !test_run_ended)  // --help, --version, --count, --list-*, --no-run
        return rc;
    if (test_cases_started == 0) {
        std::fprintf(stderr, "%s: no test case ran (the filters match nothing, or the file has no "
                             "test cases); failing\n", argc > 0 ? argv[0] : "doctest");
        return rc != 0 ? rc : 1;
    }
    return rc;
}
