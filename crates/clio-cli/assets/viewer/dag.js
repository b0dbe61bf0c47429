// dag
