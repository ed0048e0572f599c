"""The executors a gate can run its cases with: their interface, registry and the run they run (``interface``),
and Ray's (``ray_executor``, its task ``ray_task``)."""
