"""Tests of busbar-mock-provider (tools/mock-provider/src/busbar_mock_provider), against the real process."""
