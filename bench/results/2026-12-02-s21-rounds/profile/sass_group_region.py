# Stall samples of a rows rescan's per-group region: from the last MUFU.EX2 of a group's steps, over
# the meeting's barrier, to the first MUFU.EX2 of the next group's (ncu source page per SASS line, csv.gz).
#   python3 sass_group_region.py ncu_rescan_1x8192x2560_sass.csv.gz
import csv,gzip,sys
f=gzip.open(sys.argv[1],'rt'); r=csv.reader(f); next(r); hdr=next(r)
iS=hdr.index("Warp Stall Sampling (All Samples)"); iE=hdr.index("Instructions Executed")
cols=[c for c in hdr if c.startswith("stall_") and "Not Issued" not in c]
ic=[hdr.index(c) for c in cols]
rows=[]
for x in r:
    if len(x)<=iE: continue
    rows.append((x[1].strip(),int(x[iS] or 0),int(x[iE] or 0),[int(x[j] or 0) for j in ic]))
tot=sum(s for _,s,_,_ in rows)
bars=[i for i,(src,s,e,_) in enumerate(rows) if src.startswith("BAR") ]
for b in bars: print("BAR at",b,rows[b][0],"exec",rows[b][2])
# region: from each hot BAR to next MUFU.EX2 (next group's steps) 
def region(a,b):
    s=sum(rows[i][1] for i in range(a,b)); e=sum(rows[i][2] for i in range(a,b))
    st=[sum(rows[i][3][k] for i in range(a,b)) for k in range(len(cols))]
    top=sorted(zip(st,cols),reverse=True)[:6]
    return s,e,top
hot=[b for b in bars if rows[b][2]>=19000]
for b in hot:
    # walk back to previous EX2 and forward to next EX2
    p=b
    while p>0 and "MUFU.EX2" not in rows[p][0]: p-=1
    n=b
    while n<len(rows)-1 and "MUFU.EX2" not in rows[n][0]: n+=1
    s,e,top=region(p+1,n)
    print(f"BAR {b}: lastEX2 {p} nextEX2 {n}: samples {s} ({100*s/tot:.1f}%), instr {e}, top {top}")
print("---- breakdown")
b=hot[0]; p=b
while "MUFU.EX2" not in rows[p][0]: p-=1
n=b
while "MUFU.EX2" not in rows[n][0]: n+=1
# print in chunks of lines with cumulative samples, marking key instrs
seg_s=0;seg_e=0;start=p+1
for i in range(p+1,n+1):
    src,s,e,_=rows[i]
    seg_s+=s;seg_e+=e
    key=any(k in src for k in ("BAR","STG","SHFL","LDGSTS","DEPBAR","LDS","MUFU","BRA","STS"))
    if key or i==n:
        print(f"{start:5d}-{i:5d} samples {seg_s:4d} instr {seg_e:8d}  last: {src[:70]}")
        seg_s=0;seg_e=0;start=i+1
