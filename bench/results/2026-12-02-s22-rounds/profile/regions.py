# The regions of one kernel of an ncu source page (csv.gz) between memory operations and barriers, with
# their share of the stall samples and their instructions per element (regions of >= 0.5% or >= 0.3 / element).
#   python3 regions.py FILE.csv.gz KERNEL_INDEX ELEMENTS
import sys
from ncu_sections import sections
secs=sections(sys.argv[1]); k=int(sys.argv[2]); elems=float(sys.argv[3])
name,hdr,body=secs[k]
iE=hdr.index("Instructions Executed"); iS=hdr.index("Warp Stall Sampling (All Samples)")
tot=sum(int(x[iS] or 0) for x in body if len(x)>iE)
seg_s=0;seg_e=0;start=0
marks=("BAR","LDGSTS","DEPBAR","EXIT","ATOMG","SHFL","LDG","RET","MEMBAR","CCTL","YIELD","ACQBULK","SYNCS")
for n,x in enumerate(body):
    if len(x)<=iE: continue
    src=x[1].strip(); s=int(x[iS] or 0); e=int(x[iE] or 0)
    seg_s+=s; seg_e+=e
    if any(m in src for m in marks):
        if seg_s*1000>=tot*5 or seg_e*32/elems>0.3:
            print(f"{start:5d}-{n:5d} samples {100*seg_s/tot:5.1f}% instr/elt {seg_e*32/elems:6.2f}  at: {src[:70]}")
        seg_s=0;seg_e=0;start=n+1
print(f"{start:5d}-end samples {100*seg_s/tot:5.1f}% instr/elt {seg_e*32/elems:6.2f}")
