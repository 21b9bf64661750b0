"""The study's drivers: the notebooks' functions, the scheduler, the dry run, the GPU smoke check, the recheck and the reproduction, the reward comparison."""
