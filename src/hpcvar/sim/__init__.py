"""Simulators: jitSim (OS jitter at scale; C core + Python reference) and application replay."""
