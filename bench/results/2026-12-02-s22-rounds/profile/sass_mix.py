# Per kernel of an ncu source page (csv.gz, one section per kernel): executed instructions per opcode (thread
# instructions per element), stall samples, stall reasons, and the 20 SASS lines with the most samples.
#   python3 sass_mix.py FILE.csv.gz ELEMENTS
import sys,collections
from ncu_sections import sections
secs=sections(sys.argv[1]); elems=float(sys.argv[2])
for name,hdr,body in secs:
    iE=hdr.index("Instructions Executed"); iS=hdr.index("Warp Stall Sampling (All Samples)")
    cols=[c for c in hdr if c.startswith("stall_") and "Not Issued" not in c]; ic=[hdr.index(c) for c in cols]
    c=collections.Counter(); s=collections.Counter(); st=collections.Counter(); tot=0; totS=0; lines=[]
    for n,x in enumerate(body):
        if len(x)<=iE: continue
        src=x[1].strip(); op=src.split()[0]
        if op.startswith('@'): op=src.split()[1]
        op=op.split('.')[0]
        e=int(x[iE] or 0); sm=int(x[iS] or 0)
        c[op]+=e; s[op]+=sm; tot+=e; totS+=sm
        for k,j in zip(cols,ic): st[k]+=int(x[j] or 0)
        lines.append((sm,n,src,e))
    print("==",name[:110]); print("warp instr",tot,"thread instr per element %.2f"%(tot*32/elems),"samples",totS)
    for op,e in c.most_common(24): print(f"  {op:9s} {e*32/elems:6.2f}/elt  samples {100*s[op]/max(totS,1):5.1f}%")
    print(" stalls:")
    for k,v in st.most_common(10): print(f"  {k:40s} {100*v/max(totS,1):5.1f}%")
    print(" top lines:")
    for sm,n,src,e in sorted(lines,reverse=True)[:20]: print(f"  {n:6d} {100*sm/max(totS,1):5.1f}% exec {e:9d} {src[:80]}")
