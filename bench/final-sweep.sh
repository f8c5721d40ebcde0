export MIN_TIME=0.2
mkdir -p /tmp/bundle; tar -xJf gpu-bundle.tar.xz -C /tmp/bundle; B=/tmp/bundle/gpu-bundle/run
p() { $B perf --min-time 0.2 "$@" 2>&1 | grep "runs -" | sed -E 's/,bs=\[1,1\],nr=\[1,1\],per=\[0,1,2,3\],k_v=0,o=1,src_overlap=0//; s/,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32//; s/,permute=\[0,1,2,3\],kv_view=1,v_is_view_of_k=0//; s/ +/ /g'; }
MM='MUL_MAT(type_a=%s,type_b=f32,m=4096,n=%s,k=14336)'
for t in f16 q4_0 q8_0 q4_K q6_K; do for n in 1 8 512; do p --case "$(printf "$MM" $t $n)"; done; done | tee $OUT/mm.txt
echo "-- variants"
for kv in sg_min_workgroups=0 sg_stages=1,sg_tk=64 sg_min_workgroups=0,sg_count_m=4,sg_count_n=2; do echo "$kv"; GGML_DAWN_MUL_MAT=$kv p --case "$(printf "$MM" f16 512)" --case "$(printf "$MM" q4_0 512)"; done | tee $OUT/mm_var.txt
for kv in vec_rows=8 vec_rows=16 vec_rows=2; do echo "$kv"; GGML_DAWN_MUL_MAT=$kv p --case "$(printf "$MM" q4_0 1)" --case "$(printf "$MM" q4_K 1)" --case "$(printf "$MM" q6_K 1)"; done | tee -a $OUT/mm_var.txt
for kv in vec_rows_wide=8 vec_rows_wide=16; do echo "$kv"; GGML_DAWN_MUL_MAT=$kv p --case "$(printf "$MM" q4_0 8)" --case "$(printf "$MM" q4_K 8)"; done | tee -a $OUT/mm_var.txt
echo "-- fa"
p --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1)' --case 'FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[4,1],kv=16384,nb=1)' --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q8_0,type_V=q8_0)' --case 'FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=16384,nb=1,type_K=q4_0,type_V=q4_0)' --case 'FLASH_ATTN_EXT(hsk=72,hsv=72,nh=16,nr23=[1,1],kv=5776,nb=5776,mask=0)' --case 'FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=512,type_K=q4_0,type_V=q4_0)' --case 'FLASH_ATTN_EXT(hsk=64,hsv=64,nh=8,nr23=[8,1],kv=7680,nb=512,type_K=q8_0,type_V=q8_0)' --case 'FLASH_ATTN_EXT(hsk=256,hsv=256,nh=2,nr23=[16,1],kv=20000,nb=1)' --case 'FLASH_ATTN_EXT(hsk=256,hsv=256,nh=2,nr23=[16,1],kv=20000,nb=512)' | tee $OUT/fa.txt
