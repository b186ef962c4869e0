/* The 4-D rank mesh: tp fastest, then sharding, then dp, then pp. */
#include "comm/comm.h"

int gpt_mesh_init(gpt_mesh *m, int tp, int sharding, int dp, int pp, int world_size, gpt_err *err)
{
	if (tp < 1 || sharding < 1 || dp < 1 || pp < 1)
		return gpt_err_set(err, GPT_EUSAGE,
				   "mesh tp=%d sharding=%d dp=%d pp=%d: every degree must be at least 1",
				   tp, sharding, dp, pp);
	int64_t prod = (int64_t)tp * sharding * dp * pp;
	if (prod != world_size)
		return gpt_err_set(err, GPT_EUSAGE,
				   "mesh tp=%d x sharding=%d x dp=%d x pp=%d = %lld ranks, but the world has %d; "
				   "change the degrees or the number of workers",
				   tp, sharding, dp, pp, (long long)prod, world_size);
	*m = (gpt_mesh){tp, sharding, dp, pp, world_size};
	return 0;
}

int gpt_mesh_rank(const gpt_mesh *m, gpt_mesh_coord c)
{
	return ((c.pp * m->dp + c.dp) * m->sharding + c.sh) * m->tp + c.tp;
}

gpt_mesh_coord gpt_mesh_coord_of(const gpt_mesh *m, int rank)
{
	gpt_mesh_coord c;
	c.tp = rank % m->tp;
	rank /= m->tp;
	c.sh = rank % m->sharding;
	rank /= m->sharding;
	c.dp = rank % m->dp;
	c.pp = rank / m->dp;
	return c;
}

int gpt_mesh_replica(const gpt_mesh *m, int rank)
{
	gpt_mesh_coord c = gpt_mesh_coord_of(m, rank);
	return c.dp * m->sharding + c.sh;
}

const char *gpt_mesh_axis_name(gpt_mesh_axis a)
{
	static const char *const names[GPT_MESH_AXES] = {"tp", "sharding", "dp", "pp", "data", "embed"};
	return a >= 0 && a < GPT_MESH_AXES ? names[a] : "?";
}

int gpt_mesh_group(const gpt_mesh *m, gpt_mesh_axis axis, int rank, int *ranks, int *n)
{
	gpt_mesh_coord c = gpt_mesh_coord_of(m, rank), x = c;
	*n = 0;
	switch (axis) {
	case GPT_MESH_TP:
		for (x.tp = 0; x.tp < m->tp; x.tp++)
			ranks[(*n)++] = gpt_mesh_rank(m, x);
		return (c.pp * m->dp + c.dp) * m->sharding + c.sh;
	case GPT_MESH_SHARDING:
		for (x.sh = 0; x.sh < m->sharding; x.sh++)
			ranks[(*n)++] = gpt_mesh_rank(m, x);
		return (c.pp * m->dp + c.dp) * m->tp + c.tp;
	case GPT_MESH_DP:
		for (x.dp = 0; x.dp < m->dp; x.dp++)
			ranks[(*n)++] = gpt_mesh_rank(m, x);
		return (c.pp * m->sharding + c.sh) * m->tp + c.tp;
	case GPT_MESH_PP:
		for (x.pp = 0; x.pp < m->pp; x.pp++)
			ranks[(*n)++] = gpt_mesh_rank(m, x);
		return (c.dp * m->sharding + c.sh) * m->tp + c.tp;
	case GPT_MESH_DATA:
		for (x.dp = 0; x.dp < m->dp; x.dp++)
			for (x.sh = 0; x.sh < m->sharding; x.sh++)
				ranks[(*n)++] = gpt_mesh_rank(m, x);
		return c.pp * m->tp + c.tp;
	case GPT_MESH_EMBED:
		if (c.pp != 0 && c.pp != m->pp - 1)
			return -1;
		x.pp = 0;
		ranks[(*n)++] = gpt_mesh_rank(m, x);
		if (m->pp > 1) {
			x.pp = m->pp - 1;
			ranks[(*n)++] = gpt_mesh_rank(m, x);
		}
		return (c.dp * m->sharding + c.sh) * m->tp + c.tp;
	default:
		return -1;
	}
}
