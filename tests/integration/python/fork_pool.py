# python.test.mjs: a multiprocessing pool with the fork start method (the default on Linux up
# to Python 3.13): the workers are forks of this interpreter, not new programs, and run
# pool_work > work_spin for about argv[1] seconds each.
import multiprocessing
import sys
import time


def work_spin(end):
    x = 0
    while time.time() < end:
        x += 1
    return x


def pool_work(index):
    return work_spin(time.time() + float(sys.argv[1]))


if __name__ == '__main__':
    multiprocessing.set_start_method('fork')
    with multiprocessing.Pool(2) as pool:
        print(sum(pool.map(pool_work, range(2))))
