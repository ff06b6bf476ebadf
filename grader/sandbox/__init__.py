"""The sandbox of kernels and verifiers, made of ordinary Linux parts, and what lives with it:
the seccomp filter, the fork servers, the compiled-program store, killing what is left."""
