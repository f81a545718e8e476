"""BreakerCell: both trip modes, cooldown growth, Retry-After floors, single half-open probe."""
from busbar.config.schema import BreakerConfig, TripConfig
from busbar.proxy.breaker import CLOSED, HALF_OPEN, OPEN, BreakerCell


def cell(**trip):
    return BreakerCell(BreakerConfig(trip=TripConfig(**trip), base_cooldown_secs=10, max_cooldown_secs=40))


def test_consecutive_trips_on_nth_failure():
    c = cell(mode="consecutive", consecutive_n=3)
    assert c.record_failure(0.0) is False
    assert c.record_failure(0.1) is False
    assert c.admits(0.2)
    assert c.record_failure(0.2) is True
    assert c.state_at(0.3) == OPEN and not c.admits(0.3)
    assert 9.0 <= c.cooldown_until - 0.2 <= 11.0          # base 10 s ± 10 %


def test_success_resets_streak():
    c = cell(mode="consecutive", consecutive_n=2)
    c.record_failure(0)
    c.record_success(1)
    assert c.record_failure(2) is False


def test_error_rate_needs_min_requests_and_evicts_old():
    c = cell(mode="error_rate", window_secs=30, threshold=0.5, min_requests=4)
    for t in range(3):
        assert c.record_failure(float(t)) is False       # fewer than min_requests outcomes
    c2 = cell(mode="error_rate", window_secs=30, threshold=0.5, min_requests=4)
    c2.record_success(0)
    c2.record_success(1)
    c2.record_failure(2)
    assert c2.record_failure(3) is True                  # 2/4 = 0.5 ≥ threshold
    c4 = cell(mode="error_rate", window_secs=5, threshold=0.9, min_requests=2)
    c4.record_failure(0)
    c4.record_success(10)
    assert c4.record_failure(10.5) is False              # the t=0 failure was evicted: 1/2 < 0.9


def test_half_open_admits_exactly_one_probe_and_reads_never_steal_it():
    c = cell(mode="consecutive", consecutive_n=1)
    c.record_failure(0)
    t = c.cooldown_until + 0.01
    assert c.admits(t) and c.state_at(t) == HALF_OPEN     # reads see half-open …
    assert c.admits(t)                                    # … and do not take the probe
    assert c.try_acquire(t) is None                       # the one probe
    assert c.try_acquire(t) is False and not c.admits(t)
    c.record_success(t + 1)
    assert c.state_at(t + 1) == CLOSED and c.try_acquire(t + 1) is True


def test_probe_failure_doubles_cooldown_clamped_to_max():
    c = cell(mode="consecutive", consecutive_n=1)
    c.record_failure(0)
    first = c.cooldown_until
    t = first + 0.01
    assert c.try_acquire(t) is None
    c.record_failure(t)
    assert 18.0 <= c.cooldown_until - t <= 22.0           # 2 × base
    for _ in range(5):
        t = c.cooldown_until + 0.01
        c.try_acquire(t)
        c.record_failure(t)
    assert c.cooldown_until - t <= 40.0                   # max_cooldown_secs


def test_retry_after_is_a_floor_and_never_shortens_a_deadline():
    """Case C023: deadline = max(old, new)."""
    c = cell(mode="consecutive", consecutive_n=99)
    c.record_failure(0.0, retry_after=1.0)                # sub-trip: honoured anyway
    assert c.cooldown_until == 1.0 and not c.admits(0.5)
    c.record_failure(0.25, retry_after=60.0)
    assert c.cooldown_until == 60.25
    c.record_failure(2.0, retry_after=1.0)                # a shorter penalty never shortens it
    assert c.cooldown_until == 60.25
    t = cell(mode="consecutive", consecutive_n=1)
    t.record_failure(0.0, retry_after=100.0)
    assert t.cooldown_until == 100.0                      # floor above the 10 s computed cooldown


def test_twenty_five_consecutive_500s_open_the_breaker():
    """Case C023 separate check, with the default error_rate config."""
    c = BreakerCell(BreakerConfig())
    opened = [c.record_failure(i * 0.01) for i in range(25)]
    assert any(opened) and c.state_at(0.3) == OPEN


def test_a_rate_limit_deadline_marks_the_cell_throttled():
    """Only while the deadline holding the cell came from a rate-limit failure (a later, longer
    outage penalty turns it into an outage; an expired cooldown is neither)."""
    c = cell(mode="consecutive", consecutive_n=100)
    c.record_failure(0.0, retry_after=30.0, rate_limited=True)
    assert c.throttled(1.0) and not c.admits(1.0)
    assert not c.throttled(30.0)
    c.record_failure(1.0, retry_after=5.0)            # a shorter 5xx penalty: still the rate limit's deadline
    assert c.throttled(2.0)
    c.record_failure(2.0, retry_after=60.0)           # a longer 5xx penalty: an outage now
    assert not c.throttled(3.0)


def test_a_tripping_rate_limit_failure_throttles_without_retry_after():
    c = cell(mode="consecutive", consecutive_n=1)
    assert c.record_failure(0.0, rate_limited=True) is True
    assert c.throttled(0.5)
    d = cell(mode="consecutive", consecutive_n=1)
    d.record_failure(0.0)
    assert not d.throttled(0.5)
