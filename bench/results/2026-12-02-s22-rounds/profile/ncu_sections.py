# The kernels of an ncu source page (--page source --csv --print-source sass, gzipped): a list of
# [kernel name, header row, SASS rows], one per "Kernel Name" section. Used by regions.py and sass_mix.py.
import csv, gzip


def sections(path):
    secs, cur = [], None
    for x in csv.reader(gzip.open(path, 'rt')):
        if x and x[0] == "Kernel Name":
            cur = [x[1], None, []]
            secs.append(cur)
        elif cur is not None and cur[1] is None:
            cur[1] = x
        elif cur is not None:
            cur[2].append(x)
    return secs
