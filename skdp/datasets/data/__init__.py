"""Compressed copies of the small public datasets that skdp ships.

See ``README.txt`` in this folder for their sources, citations and licence.
"""
