"""Mandelbrot tiles across a pool of Hosts on Ray: python -m examples.ray_pool --help."""
