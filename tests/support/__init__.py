"""Helpers of the test suite: the tiny real Trainer, the composer launcher, multi-rank runs, fault hooks, loggers."""
