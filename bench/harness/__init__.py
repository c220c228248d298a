"""What every measurement stands on: the environment, process sampling, the bench sink, the peer, the tables."""
