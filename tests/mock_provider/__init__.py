"""Tests of busbar-mock-provider (kernel/src/busbar/devtools/mock_provider), against the real process."""
