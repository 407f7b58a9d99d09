# Sourced by .ci/run: each phase of the run is timed, and the report is printed however the run
# ends (an EXIT trap). `phase NAME` ends the running phase and starts NAME; `phase ''` ends it.
# The report is benchmarks/ci_time.py over the phases and what tests/timing_plugin.py recorded.
# Needs: start (the run's first instant), CI_PHASES (a file), WHEELFACTORY_TEST_TIMES.
phase_name='' phase_start=0
phase() {
    [ -z "$phase_name" ] || echo "$phase_name $(( $(date +%s) - phase_start ))" >> "$CI_PHASES"
    phase_name=$1 phase_start=$(date +%s)
}
report() {
    phase ''
    echo "ci: where the time went (benchmarks/ci_time.py)"
    python3 benchmarks/ci_time.py --ci-phases "$CI_PHASES" "$WHEELFACTORY_TEST_TIMES" || true
    echo "ci: finished in $(( $(date +%s) - start )) s"
}
