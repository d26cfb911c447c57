"""Mutations of scripts/image-sizes (the table of docs/image.md: where the image's bytes go)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_image_sizes.py",)

TABLE = ("tests/e2e/test_image_sizes.py::test_every_byte_of_the_root_is_in_one_row_and_the_rows_add_up_to_the_image",)

MUTATIONS = (
    Mutation("sizes-count-the-layer-twice", "scripts/image-sizes",
             'rows["layer format"] = ("tar headers and padding around the files", layer_bytes - files)',
             'rows["layer format"] = ("tar headers and padding around the files", layer_bytes)', TABLE,
             "the size table's rows add up to more than the image"),
    Mutation("sizes-count-nft-among-the-programs", "scripts/image-sizes",
             "/sbin/(?:xtables|iptables|ip6tables|nft|ebtables|arptables)",
             "/sbin/(?:xtables|iptables|ip6tables|ebtables|arptables)", TABLE,
             "the firewall's row leaves out nft (counted among the programs)"),
    Mutation("sizes-keep-only-a-packages-last-file", "scripts/image-sizes",
             "                packages[dist] = packages.get(dist, 0) + n",
             "                packages[dist] = n", TABLE,
             "a Python package's row holds only its last file: the rows no longer add up to the image"),
)
