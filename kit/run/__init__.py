"""What every command runs on: a notebook in a kernel under a timeout (and the main kernel it may need), a stop
on a signal that ends every kernel, the GPUs handed to cases, a run directory's lock, the compile caches a kernel
keeps, and the console the commands log to.
"""
