/* Monotonic wall-clock time for rates, ETAs, timeouts and benchmarks. */
#ifndef DT_UTIL_CLOCK_H
#define DT_UTIL_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double dt_now(void);
/* Sleeps for the given number of seconds (resumes after signal interruptions). */
void dt_sleep(double seconds);

#endif
