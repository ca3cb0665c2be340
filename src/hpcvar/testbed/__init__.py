"""A virtual cluster on one machine: hosts in network namespaces, a bridge as the switch, shaped links.

- plan.py: names, addresses, rates, the state file and the ssh-like agent (pure, no root);
- netns.py: up / down / status with ip and tc (root);
- traffic.py, noise.py: bounded cross traffic and flow measurements between hosts;
- launcher.py: the ``testbed`` launcher (MPI ranks on testbed hosts, TCP forced through the links).
"""
