"""A PMI-1 client run by ``srun --mpi=pmi2``: one ``put`` of a value of ``argv[1]`` characters, as MPICH's PMI-1 client
sends a segment of a long value (tests/testbed/test_srun_testbed.py). Prints each answer of slurmstepd."""

import os
import sys

fd = int(os.environ["PMI_FD"])


def request(line: str) -> str:
    os.write(fd, line.encode())
    return os.read(fd, 4096).decode().strip()


print(request("cmd=init pmi_version=1 pmi_subversion=1\n"))
print(request("cmd=get_maxes\n"))
kvs = request("cmd=get_my_kvsname\n").split("kvsname=")[1].split()[0]
line = f"cmd=put kvsname={kvs} key=bc-0-seg-1/2 value={'3' * int(sys.argv[1])}\n"
print(f"line of {len(line)} bytes:", request(line))
