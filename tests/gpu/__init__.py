"""Tests of wagogpu.gpu, the low-level wgpu backend (run on lavapipe in CI)."""
