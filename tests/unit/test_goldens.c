/* test_goldens.c - every program in tests/golden/programs.txt and every conformance case, run
 * on the CPU executor, gives exactly the hashes in the golden files (every level of every slot). */
#include <stdlib.h>

#include "../conformance/cases.h"
#include "../golden/golden.h"
#include "test.h"

static char *px__program(const char *name, void *ex, px_golden_stats *stats)
{
    return px_golden_run_line(&pxvm_cpu_executor, ex, name, stats);
}

static char *px__case(const char *name, void *reports, px_golden_stats *stats)
{
    (void)stats; /* counted when the cases ran */
    return px_case_report(reports, name);
}

TEST(goldens_every_output_of_every_program)
{
    pxvm_executor *ex;
    pxvm_error err;
    px_golden_stats st = {0};
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0);
    CHECK(px_golden_check("tests/golden/goldens.txt", px__program, ex, &st, stderr) == 0);
    CHECK_EQ(st.differences, 0);
    CHECK_EQ(st.programs, 9);
    pxvm_cpu_executor.close(ex);
}

TEST(goldens_every_conformance_case)
{
    pxvm_executor *ex;
    pxvm_error err;
    px_golden_stats st = {0};
    px_case_reports reports;
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0);
    CHECK(px_case_run_all(&pxvm_cpu_executor, ex, &st, &reports) == 0);
    CHECK(reports.n >= 30);
    st.differences = 0;
    st.sections = 0;
    CHECK(px_golden_check("tests/conformance/goldens.txt", px__case, &reports, &st, stderr) == 0);
    CHECK_EQ(st.differences, 0);
    CHECK_EQ(st.sections, reports.n); /* every case has its goldens */
    px_case_reports_free(&reports);
    pxvm_cpu_executor.close(ex);
}
