"""The plugin's arguments: each command's parser, the flags several share, and the help texts.

May import the commands (each parser names its handler), the cluster reads and the formats;
only the entry points above import it.
"""
