// Translation unit that carries the shared libtorch precompiled header.
