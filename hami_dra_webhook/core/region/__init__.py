"""HAMi-core's shared region (the file `libvgpu.so` keeps per container, per claim under the DRA
driver): its binary layout, a decoder that treats the bytes as a tenant's (they are: the file is
mapped writable into the container), what a region says a container uses, and HAMi's feedback
loop as a pure function. No I/O: the node monitor reads and writes the files."""
