"""Connectors to real sources and sinks, where Storm keeps them (``external/``): each needs an
optional extra (``pip install 'squall[redis]'``, ...) and imports its library only when used."""
